"""LocalEvaluators: several warm evaluator processes, results matched to their candidates."""
from __future__ import annotations

from pathlib import Path

from kbx_ray.evaluate.parent.local_evaluators import LocalEvaluators
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate


def test_two_evaluators_answer_every_candidate_in_any_order():
    relu, exp = get_task("activation/relu"), get_task("math/exp")
    pairs = [(relu, make_candidate(relu.task_id, "relu", Path(relu.solution_path).read_text())),
             (exp, make_candidate(exp.task_id, "exp", Path(exp.solution_path).read_text())),
             (relu, make_candidate(relu.task_id, "relu",
                                   (FIXTURES / "candidates" / "wrong_values.py").read_text()))]
    cfg = EvalConfig(device="cpu", seeds=1)
    with LocalEvaluators(cfg, jobs=2) as evs:
        assert evs.info["device"] == "cpu"
        got = dict(evs.map(pairs))
        cold = dict(evs.map(pairs[:1], cold=True))
    assert sorted(got) == [0, 1, 2]
    assert [got[i].task_id for i in range(3)] == [relu.task_id, exp.task_id, relu.task_id]
    assert got[0].exec_ok and got[1].exec_ok
    assert not got[2].exec_ok and got[2].error_kind == "mismatch"
    assert cold[0].exec_ok
