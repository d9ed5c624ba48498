"""Ray wrappers around the evaluator: a warm actor per GPU, or a fresh process per candidate.

An actor rather than a task per candidate because a warm worker evaluates a new kernel in about
0.06 s while a fresh process pays about 5 s before it times anything (FIELD.md, calibration).
`evaluate_in_fresh_process` is the simple form (`engine.mode=task`) and the benchmarks' baseline.
"""
from __future__ import annotations

import os
from typing import Any

import ray

from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.types import Candidate, EvalResult, Task


def _node() -> tuple[str, str]:
    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    accel = ""
    for n in ray.nodes():
        if n.get("NodeID") == node_id:
            accel = next((k.split(":", 1)[1] for k in n.get("Resources", {})
                          if k.startswith("accelerator_type:")), "")
    return node_id, accel


def _evaluator(cfg: EvalConfig) -> Any:
    """Imported here: the evaluator brings torch (seconds), which a noop actor never needs."""
    from kbx_ray.evaluate.evaluator import Evaluator

    return Evaluator(cfg)


@ray.remote
class EvaluatorActor:
    def __init__(self, cfg: EvalConfig, noop: bool = False) -> None:
        self.noop = noop
        self.evaluator = None if noop else _evaluator(cfg)
        self.node_id, self.node_accelerator = _node()

    def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        if self.evaluator is None:  # engine overhead benchmark: an instant, passing verdict
            res = EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id, stage="done",
                             call_ok=True, exec_ok=True, device="cpu")
        else:
            res = self.evaluator.evaluate(task, cand)
        res.node_id, res.node_accelerator = self.node_id, self.node_accelerator
        return res

    def evaluate_batch(self, items: list[tuple[Task, Candidate]]) -> list[EvalResult]:
        """Several candidates in one call, one after another: with instant verdicts the Ray round
        trip, not the evaluation, is the cost (engine.eval_batch)."""
        return [self.evaluate(task, cand) for task, cand in items]

    def info(self) -> dict:
        """The worker's versions and device, and this process's pid (the pool tells a restarted
        actor by it)."""
        if self.evaluator is None:
            return {"device": "cpu", "pid": os.getpid()}
        return dict(self.evaluator.sandbox.info, device=self.evaluator.device, pid=os.getpid())


@ray.remote
def evaluate_in_fresh_process(cfg: EvalConfig, task: Task, cand: Candidate) -> EvalResult:
    ev = _evaluator(cfg)
    try:
        res = ev.evaluate(task, cand)
    finally:
        ev.close()
    res.node_id, res.node_accelerator = _node()
    return res
