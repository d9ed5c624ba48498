"""Timed calls run the verified program (INTEGRITY.md, "The replay"): the recorded kernel program
is timed on its own in the replay process, and a live timed median faster than it beyond noise is
`timing_invalid`. On the CPU this is the timing protocol on the interpreter (`cpu_timing`): its
figures say nothing about a GPU, but the comparison is the same."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate

TASK = "matrix_multiply/addmm"


@pytest.fixture(scope="module")
def timed():
    # no fresh sets: their own check (a first call's cold host path against the median) can
    # catch a class-2 fixture first on a loaded CPU, and this module tests the program's timing
    ev = Evaluator(EvalConfig(device="cpu", cpu_timing=True, unseen_cases=0, case_timeout_s=180,
                              load_timeout_s=120, fresh_sets=0))
    yield ev
    ev.close()


def _judge(ev: Evaluator, code: str):
    task = get_task(TASK)
    return ev.evaluate(task, make_candidate(TASK, task.name, code))


@pytest.mark.parametrize("fixture", ["e2_alpha_type_probe_addmm", "e2_float_identity_probe_addmm"])
def test_torch_only_in_unwatched_timed_calls_is_timing_invalid(timed, fixture):
    """Each class-2 fixture (it tells watched calls from unwatched ones) is caught on the CPU."""
    code = (FIXTURES / "exploits" / f"{fixture}.py").read_text()
    res = _judge(timed, code)
    assert not res.exec_ok and res.error_kind == "timing_invalid", res.error_msg
    assert "recorded kernel program" in res.error_msg and res.stage == "timing"


def test_an_honest_kernel_is_not_faster_than_its_program(timed):
    res = _judge(timed, Path(get_task(TASK).solution_path).read_text())
    assert res.exec_ok, res.error_msg
    timed_cases = [c for c in res.cases if c.cand_ms]
    assert timed_cases and all(c.replay_ms and c.replay_ms > 0 for c in timed_cases)
