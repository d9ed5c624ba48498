"""The timing protocol on the CPU: the interpreter, timed by the host clock (`cpu_timing`).

On a GPU a candidate's timed cases are timed under one exclusive hold, then each is checked again on
a fresh seed written into the very buffers that were timed. The figures mean nothing here; the point
is that CI runs the same requests, buffers and verdicts as the GPU does.
"""
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.parent.gpulock import NoLock
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.common.timing import TimingConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate

RELU = get_task("activation/relu")
GOOD = Path(RELU.solution_path).read_text()
REPS = 110  # enough timed calls per case for a cache that switches on after 100


@pytest.fixture(scope="module")
def timed_ev():
    # the default timing_group_mb: every small case in one exclusive hold, then each rechecked
    ev = Evaluator(EvalConfig(device="cpu", cpu_timing=True, case_timeout_s=180, unseen_cases=0,
                              load_timeout_s=180,
                              timing=TimingConfig(min_reps=REPS, max_reps=REPS, budget_s=0.0)))
    yield ev
    ev.close()


def test_every_case_is_timed_then_rechecked(timed_ev):
    res = timed_ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert res.exec_ok, res.error_msg
    assert "cpu_timing" in res.flags and not res.timing_skipped
    assert res.cases and all(c.cand_reps == REPS and c.cand_ms > 0 and c.ref_ms > 0
                             and c.speedup for c in res.cases)
    assert res.stage_s["timing"] > 0 and res.stage_s["w_encode"] > 0  # the rechecks sent outputs


class WriterAlwaysWaiting(NoLock):
    """A lock with another evaluator always waiting to time: where the stages step aside."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def writer_waiting(self) -> bool:
        return True

    def let_writer_in(self, label: str = "") -> None:
        self.steps.append(sys._getframe(1).f_code.co_name)

    @contextmanager
    def released(self, label: str = "") -> Iterator[None]:
        self.steps.append("released")
        yield


def test_the_timed_cases_checks_step_aside_for_a_waiting_writer(timed_ev):
    # the recheck and its comparisons hold the GPU shared for seconds a case on a GPU: a writer
    # waiting meanwhile is let in after the recheck's reply and after its timed outputs' check
    lock, timed_ev.lock = timed_ev.lock, WriterAlwaysWaiting()
    try:
        res = timed_ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
        steps = timed_ev.lock.steps
    finally:
        timed_ev.lock = lock
    assert res.exec_ok, res.error_msg
    timed = sum(1 for c in res.cases if c.cand_ms)
    assert timed and steps.count("_check_timed_case") == 2 * timed, steps
    assert "_check_case" in steps  # the correctness stage's own steps, as before
    # each case's kernels compiled in the replay process with the hold let go, once a case
    assert steps.count("released") == len(res.cases), steps
    assert res.stage_s["replay_warm"] > 0


def test_a_cache_switched_on_during_timing_is_caught_by_the_recheck(timed_ev):
    code = (FIXTURES / "exploits" / "timed_pointer_cache.py").read_text()
    res = timed_ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    # its cache is keyed by the tensor object's id: whether the recheck's call hits it depends on
    # which objects the worker's allocator reuses; when it misses, the cached timed calls are still
    # far faster than the recorded program timed alone (the replay's timing check)
    assert (res.exec_ok, res.stage) == (False, "timing"), res.error_msg
    assert (res.error_kind == "mismatch" and "after timing" in res.error_msg) or (
        res.error_kind == "timing_invalid" and "its own recorded kernel program" in res.error_msg), \
        res.error_msg
    follow = timed_ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert follow.exec_ok, follow.error_msg


def test_without_cpu_timing_the_interpreter_skips_timing(cpu_evaluator):
    res = cpu_evaluator.evaluate(RELU, make_candidate(RELU.task_id, "relu", GOOD))
    assert res.exec_ok and res.timing_skipped and "cpu_timing" not in res.flags
    assert all(c.cand_ms is None for c in res.cases)
