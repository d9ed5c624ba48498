"""The design test of the replay (INTEGRITY.md, "The replay"): with the in-process monitor switched
off (`evaluation.monitor=off`, tests only), the replay alone still catches every exploit fixture
whose route is host-side compute, a torch op, a hook or trampoline, or a deferred write. Each such
fixture names the kind it must end with in a `replay:` line of its docstring.

The monitor off means: no aten op refused, no host value marked, no launch counted against the
candidate and no torch op judged; the static checks are switched off too, so nothing but the replay
stands between the candidate and a pass. The live outputs are still compared first: a fixture whose
live outputs are wrong is caught there, and a `mismatch` that the live outputs did not show must
name the replay.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate


def _replay_fixtures() -> list[tuple[str, str, str, str]]:
    out = []
    for path in sorted((FIXTURES / "exploits").glob("*.py")):
        code = path.read_text()
        doc = ast.get_docstring(ast.parse(code)) or ""
        meta = dict(re.findall(r"^(task|replay|device): *(\S+)", doc, re.M))
        if "replay" in meta and meta.get("device") != "gpu":
            out.append((path.stem, code, meta.get("task", "activation/relu"), meta["replay"]))
    return out


FIXTURES_OFF = _replay_fixtures()


@pytest.fixture(scope="module")
def unmonitored():
    ev = Evaluator(EvalConfig(device="cpu", monitor="off", case_timeout_s=60, load_timeout_s=60))
    yield ev
    ev.close()


def test_the_design_set_is_broad():
    """Every route the issue names has fixtures here: host compute (c4, d2, d4), torch ops (c3,
    d1, d5, torch_compute_decoy), hooks and trampolines (c1), deferred writes (d3)."""
    names = {n for n, *_ in FIXTURES_OFF}
    for prefix in ("c1_", "c3_", "c4_", "d1_", "d2_", "d3_", "d4_", "d5_", "torch_compute_decoy"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert len(names) >= 25


@pytest.mark.parametrize("name, code, task_id, kind", FIXTURES_OFF,
                         ids=[f[0] for f in FIXTURES_OFF])
def test_the_replay_alone_catches_it(name, code, task_id, kind, unmonitored, static_off):
    # the static layer off: the replay alone
    task = get_task(task_id)
    res = unmonitored.evaluate(task, make_candidate(task_id, task.name, code))
    assert not res.exec_ok, f"{name} passed with the monitor off"
    assert res.error_kind == kind, f"{name}: {res.error_kind}: {res.error_msg}"
    if kind == "mismatch":
        assert "replay" in res.error_msg, f"{name} was not caught by the replay: {res.error_msg}"
