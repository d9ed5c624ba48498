"""Ray wrappers around the evaluator: a warm actor per GPU, or a fresh process per candidate.

An actor rather than a task per candidate because a warm worker evaluates a new kernel in about
0.06 s while a fresh process pays about 5 s before it times anything (FIELD.md, calibration).
`evaluate_in_fresh_process` is the simple form (`engine.mode=task`) and the benchmarks' baseline.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import ray

from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Stage, Task


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
    from kbx_ray.evaluate.parent.evaluator import Evaluator

    return Evaluator(cfg)


@ray.remote
class EvaluatorActor:
    def __init__(self, cfg: EvalConfig, noop: bool = False) -> None:
        self.noop = noop
        self.evaluator = None if noop else _evaluator(cfg)
        self.node_id, self.node_accelerator = _node()

    def evaluate(self, task: Task, cand: Candidate, aot: Any = None) -> EvalResult:
        """`aot`: an evaluate/aot.AotResult, kernels compiled on a CPU node; they go into the
        worker's Triton cache first, so its compiles for this GPU become cache hits."""
        where = {"node_id": self.node_id, "node_accelerator": self.node_accelerator}
        if self.evaluator is None:  # engine overhead benchmark: an instant, passing verdict
            return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id,
                              stage=Stage.DONE, call_ok=True, exec_ok=True, device="cpu", **where)
        return replace(_evaluate(self.evaluator, task, cand, aot), **where)

    def evaluate_batch(self, items: list[tuple[Task, Candidate, Any]]) -> list[EvalResult]:
        """Several candidates in one call, one after another: with instant verdicts the Ray round
        trip, not the evaluation, is the cost (engine.eval_batch)."""
        return [self.evaluate(*item) for item in items]

    def info(self) -> dict:
        """The worker's versions and device, and this process's pid (the pool tells a restarted
        actor by it)."""
        if self.evaluator is None:
            return {"device": "cpu", "pid": os.getpid()}
        return dict(self.evaluator.sandbox.info, device=self.evaluator.device, pid=os.getpid())


def _evaluate(evaluator: Any, task: Task, cand: Candidate, aot: Any) -> EvalResult:
    """The evaluation, whatever happens in this process: the actor outlives any one candidate
    (the evaluator already turns its own failures into `infra_error`; this is the last net)."""
    try:
        seeded = _seed(evaluator, aot)
        res = evaluator.evaluate(task, cand)
    except Exception as e:  # noqa: BLE001 - an actor that dies loses every queued candidate
        import logging

        logging.getLogger(__name__).exception("evaluating %s failed", cand.candidate_id)
        return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id,
                          error_kind=ErrorKind.INFRA_ERROR, device=getattr(evaluator, "device", ""),
                          error_msg=f"the evaluator failed ({type(e).__name__}: {e}); not the "
                                    "candidate's fault: re-run it")
    return replace(res, stage_s={**res.stage_s, **seeded}) if seeded else res


def _seed(evaluator: Any, aot: Any) -> dict[str, float]:
    """Write the ahead-of-time kernels into the worker's Triton cache; what it did, for stage_s
    (`aot_compile`: seconds on the CPU node; `aot_kernels`: a count; `aot_seed`: seconds here)."""
    if aot is None or not aot.files:
        evaluator.sandbox.seed_triton({})  # nothing of an earlier candidate's is seeded again
        return {}
    import time

    mine = evaluator.sandbox.info.get("triton", "")
    if mine and aot.triton and mine != aot.triton:
        _warn_once(f"ahead-of-time kernels come from Triton {aot.triton} but this evaluator's "
                   f"worker runs {mine}: none would be a cache hit, so none are used; install the "
                   "same triton on the compile nodes")
        evaluator.sandbox.seed_triton({})
        return {"aot_compile": aot.wall_s, "aot_kernels": 0.0}

    t0 = time.perf_counter()
    try:  # into the worker's own cache, and any worker started for this candidate
        evaluator.sandbox.seed_triton(aot.files)
    except (OSError, ValueError) as e:  # a full disk, a foreign cache dir: the GPU compiles
        _warn_once(f"ahead-of-time kernels not seeded ({type(e).__name__}: {e}); the worker "
                   "compiles as usual")
        return {"aot_compile": aot.wall_s, "aot_kernels": 0.0}
    return {"aot_compile": aot.wall_s, "aot_kernels": float(aot.kernels),
            "aot_seed": time.perf_counter() - t0}


_WARNED: set[str] = set()


def _warn_once(msg: str) -> None:
    if msg not in _WARNED:
        _WARNED.add(msg)
        import logging

        logging.getLogger(__name__).warning(msg)


@ray.remote
def evaluate_in_fresh_process(cfg: EvalConfig, task: Task, cand: Candidate,
                              aot: Any = None) -> EvalResult:
    ev = _evaluator(cfg)
    try:
        res = _evaluate(ev, task, cand, aot)
    finally:
        ev.close()
    node_id, accel = _node()
    return replace(res, node_id=node_id, node_accelerator=accel)
