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


def test_profile_dir_holds_each_evaluations_and_each_workers_stats(tmp_path):
    """`suite_gpu.py --profile`: the evaluator's stats per evaluation, the workers' per process."""
    import pstats

    from kbx_ray.evaluate.settings import Landlock

    relu = get_task("activation/relu")
    cfg = EvalConfig(device="cpu", seeds=1, unseen_cases=0)
    (tmp_path / "workers").mkdir()
    cfg.sandbox.extra_env["KBX_WORKER_PROFILE"] = str(tmp_path / "workers")
    cfg.sandbox.landlock = Landlock.off
    code = Path(relu.solution_path).read_text()
    with LocalEvaluators(cfg, jobs=1, profile_dir=str(tmp_path)) as evs:
        (_, res), = evs.map([(relu, make_candidate(relu.task_id, "relu", code))])
    assert res.exec_ok, res.error_msg
    mine = list(tmp_path.glob("activation__relu.*.prof"))
    workers = list((tmp_path / "workers").glob("worker.*.prof"))
    assert len(mine) == 1 and len(workers) == 2  # the judging worker and the replay process
    assert any(f[2] == "evaluate" for f in pstats.Stats(str(mine[0])).stats)
    ran = {f[2] for w in workers for f in pstats.Stats(str(w)).stats}
    assert {"run", "replay"} <= ran
