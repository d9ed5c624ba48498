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


def generation_reserve(pool: hardware.HardwarePool, cfg: Config) -> int:
    """GPUs of the pool's type that the sweep's vLLM replicas will hold beside its evaluators.

    On a cluster laid out like cluster.yaml (kbx-role labels) generation has nodes of its own and
    nothing is reserved. On one machine started by `ray.init()` the replicas and the evaluators
    share its GPUs, and evaluators that took them all would leave the replicas pending forever.
    """
    if not pool.is_gpu:
        return 0
    from kbx_ray.config import models
    from kbx_ray.llm.vllm_spec import generation_gpus, has_roles

    if has_roles():
        return 0
    return sum(generation_gpus(m, pool.accelerator_type) for m in models(cfg))


def pool_gpus(pool: hardware.HardwarePool) -> float:
    """GPUs of the pool's type on the live nodes of the cluster."""
    import ray

    key = f"accelerator_type:{pool.accelerator_type}" if pool.accelerator_type else None
    return sum(n.get("Resources", {}).get("GPU", 0) for n in ray.nodes()
               if n.get("Alive") and (key is None or key in n.get("Resources", {})))


def actors_for(pool: hardware.HardwarePool, requested: int, reserved: int = 0,
               per_gpu: int = 1) -> int:
    """One evaluator per GPU of the pool's type in the cluster (`per_gpu` of them with
    `engine.evaluators_per_gpu`), less the `reserved` GPUs that generation holds there (or
    `engine.evaluators` if set)."""
    import ray

    if not pool.is_gpu:
        return requested or max(1, min(4, int(ray.cluster_resources().get("CPU", 1)) // 2))
    gpus, per = pool_gpus(pool), max(pool.num_gpus_per_actor, 1)
    if reserved and gpus and gpus - reserved < per:  # gpus == 0: the autoscaler may add some
        raise ConfigError(
            f"pool {pool.name!r} has no GPU left for evaluators: the cluster has {gpus:g} and "
            f"the sweep's vLLM replicas need {reserved} of them: add a GPU, or serve the model "
            "elsewhere (model=openai, or a cluster with generation nodes: cluster.yaml)")
    if requested > 0:
        if reserved and requested * per > gpus - reserved:
            log.warning("pool %s: engine.evaluators=%d leaves fewer than the %d GPU(s) the vLLM "
                        "replicas need; they will wait for them", pool.name, requested, reserved)
        return requested
    return max(1, int((gpus - reserved) // per)) * max(1, per_gpu)


class EvaluatorPool:
    def __init__(self, pool: hardware.HardwarePool, cfg: Config) -> None:
        import ray

        from kbx_ray.evaluate.actor import EvaluatorActor, evaluate_in_fresh_process

        self.ray, self.pool, self.mode = ray, pool, cfg.engine.mode
        self.retries, self.stats = cfg.engine.retries, PoolStats()
        self.ecfg = eval_config_for(pool, cfg)
        self.opts = dict(hardware.ray_options(pool), num_cpus=1)
        per_gpu = max(1, cfg.engine.evaluators_per_gpu) if pool.is_gpu else 1
        if per_gpu > 1:  # k evaluators per GPU: Ray packs them by the fractional request
            self.opts["num_gpus"] = self.opts["num_gpus"] / per_gpu
        self.reserved = generation_reserve(pool, cfg)
        n = actors_for(pool, cfg.engine.evaluators, self.reserved, per_gpu)
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

    def close(self) -> None:
        """End the evaluators now, not when the last handle is collected: a driver that keeps
        the sweep's exception (a notebook, a test) would otherwise keep their CPUs and GPUs."""
        for a in self.actors:
            if a is not None:
                self.ray.kill(a)

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
