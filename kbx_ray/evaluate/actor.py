"""The evaluator actor: one per GPU, holding one warm sandbox worker for its whole life.

A Ray actor rather than a task per candidate because a warm worker evaluates a new kernel in about
0.06 s while a fresh process pays about 5 s before it times anything (FIELD.md, calibration).
"""
from __future__ import annotations

import ray

from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator
from kbx_ray.types import Candidate, EvalResult, Task


@ray.remote(max_restarts=2, max_task_retries=0)
class EvaluatorActor:
    def __init__(self, cfg: EvalConfig) -> None:
        self.evaluator = Evaluator(cfg)

    def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        return self.evaluator.evaluate(task, cand)

    def info(self) -> dict:
        return dict(self.evaluator.sandbox.info, device=self.evaluator.device)
