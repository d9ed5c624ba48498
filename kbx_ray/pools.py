"""Evaluator pools: one set of evaluator actors per hardware pool, with bounded calls in flight.

Each actor evaluates one candidate at a time (timing has the GPU to itself); the pool hands a free
actor to each request and queues the rest. An actor that dies mid-candidate is restarted by Ray
(`max_restarts`) and the candidate is retried; after `retries` it is recorded as `infra_error`.
`mode=task` instead runs one GPU-pinned Ray task per candidate in a fresh process, and `mode=noop`
answers instantly, to measure the engine's own overhead.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kbx_ray import hardware
from kbx_ray.config import Config, ConfigError
from kbx_ray.types import Candidate, EvalResult, Task

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    retried: int = 0
    in_flight: int = 0
    waiting: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self, name: str, n_actors: int) -> str:
        rate = self.done / max(1e-9, time.monotonic() - self.started)
        return (f"pool {name}: {n_actors} evaluators, {self.in_flight} running, {self.waiting} queued, "
                f"{self.done} done ({self.failed} failed, {self.retried} retried), {rate:.2f}/s")


def eval_config_for(pool: hardware.HardwarePool, cfg: Config) -> Any:
    ecfg = copy.deepcopy(cfg.evaluation)
    ecfg.peak_gbps = pool.peak_gbps
    ecfg.peak_tflops = hardware.peak_table(pool)
    if not pool.is_gpu:
        ecfg.device = "cpu"
    return ecfg


def actors_for(pool: hardware.HardwarePool, requested: int) -> int:
    """One evaluator per GPU of the pool's type in the cluster (or `engine.evaluators` if set)."""
    import ray

    if requested > 0:
        return requested
    if not pool.is_gpu:
        return max(1, min(4, int(ray.cluster_resources().get("CPU", 1)) // 2))
    key = f"accelerator_type:{pool.accelerator_type}" if pool.accelerator_type else None
    gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in ray.nodes()
               if n.get("Alive") and (key is None or key in n.get("Resources", {})))
    return max(1, int(gpus // max(pool.num_gpus_per_actor, 1)))


class EvaluatorPool:
    def __init__(self, pool: hardware.HardwarePool, cfg: Config) -> None:
        import ray

        from kbx_ray.evaluate.actor import EvaluatorActor, evaluate_in_fresh_process

        self.ray, self.pool, self.mode = ray, pool, cfg.engine.mode
        self.retries, self.stats = cfg.engine.retries, PoolStats()
        self.ecfg = eval_config_for(pool, cfg)
        self.opts = dict(hardware.ray_options(pool), num_cpus=1)
        n = actors_for(pool, cfg.engine.evaluators)
        if self.mode == "task":
            self.task_fn = evaluate_in_fresh_process.options(max_retries=0, **self.opts)
            n = max(n, 1)
            self.actors = [None] * n  # slots: at most one task per GPU at a time
        else:
            self.actors = [EvaluatorActor.options(max_restarts=-1, **self.opts).remote(
                self.ecfg, self.mode == "noop") for _ in range(n)]
        self.free: asyncio.Queue = asyncio.Queue()
        self.ready_s = cfg.engine.actor_ready_s

    async def start(self) -> None:
        """Hand out only actors that came up: one that cannot be placed (too few CPUs or GPUs of
        the type) would otherwise take candidates and never answer."""
        if self.mode == "task":
            for a in self.actors:
                self.free.put_nowait(a)
            return
        pending = {a.info.remote(): a for a in self.actors}
        ready, _ = await asyncio.to_thread(self.ray.wait, list(pending), num_returns=len(pending),
                                           timeout=self.ready_s)
        up = [pending[r] for r in ready]
        for a in self.actors:
            if a not in up:
                self.ray.kill(a, no_restart=True)
        if not up:
            raise ConfigError(f"no evaluator for pool {self.pool.name!r} started within "
                              f"{self.ready_s:g} s: the cluster lacks free {self.opts} "
                              "(add nodes, or lower engine.evaluators)")
        if len(up) < len(self.actors):
            log.warning("pool %s: %d of %d evaluators started (not enough free resources for the "
                        "rest); going on with %d", self.pool.name, len(up), len(self.actors), len(up))
        self.actors = up
        for a in up:
            self.free.put_nowait(a)

    async def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        last = ""
        for attempt in range(self.retries + 1):
            self.stats.waiting += 1
            actor = await self.free.get()
            self.stats.waiting -= 1
            self.stats.in_flight += 1
            try:
                ref = (self.task_fn.remote(self.ecfg, task, cand) if actor is None
                       else actor.evaluate.remote(task, cand))
                res: EvalResult = await ref
                problem = hardware.check_gpu_name(self.pool, res.gpu_name or res.device) \
                    if self.ecfg.device != "cpu" or not self.pool.is_gpu else None
                if problem:
                    raise ConfigError(problem)
                self.stats.done += 1
                self.stats.failed += 0 if res.exec_ok else 1
                return res
            except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError,
                    self.ray.exceptions.NodeDiedError) as e:
                last = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                self.stats.retried += 1
                log.warning("evaluator on pool %s died on %s (attempt %d/%d): %s", self.pool.name,
                            task.task_id, attempt + 1, self.retries + 1, last)
                if actor is not None and attempt < self.retries:
                    await self._await_restart(actor)
            finally:
                self.stats.in_flight -= 1
                self.free.put_nowait(actor)
        self.stats.done += 1
        self.stats.failed += 1
        return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id, stage="compile",
                          error_kind="infra_error",
                          error_msg=f"evaluator died {self.retries + 1} times: {last}")

    async def _await_restart(self, actor: Any, timeout_s: float = 300.0) -> None:
        """Wait until Ray has restarted the actor (it answers `info`), so a retry is not wasted on
        an actor that is still coming back."""
        deadline = time.monotonic() + timeout_s
        delay = 0.2
        while time.monotonic() < deadline:
            try:
                await actor.info.remote()
                return
            except self.ray.exceptions.RayActorError:
                await asyncio.sleep(delay)
                delay = min(2.0, delay * 1.5)
