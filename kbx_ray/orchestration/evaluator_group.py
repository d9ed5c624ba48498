"""An evaluator group: the evaluator actors of one hardware pool, with bounded calls in flight.
More: kbx_ray/orchestration/README.md, `evaluator_group.py`.
"""
from __future__ import annotations

import asyncio
import copy
import logging
from functools import partial
from math import inf
from types import SimpleNamespace
from typing import Any, Sequence

from kbx_ray.config import hardware
from kbx_ray.orchestration import scaling
from kbx_ray.orchestration.actor_group import ActorGroup, Revival
from kbx_ray.config.structured import EngineConfig, ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.evaluate.settings import Device, EvalConfig
from kbx_ray.orchestration.evaluator_dispatch import Dispatch, GroupStats, Lane, Request
from kbx_ray.orchestration.evaluator_loss import MOVES, EvaluatorLost, NodeLost
from kbx_ray.orchestration.per_loop import PerLoop
from kbx_ray.orchestration.retry import Backoff, retry
from kbx_ray.orchestration.scaling import actors_for, generation_reserve, pool_gpus
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Stage, Task

log = logging.getLogger(__name__)


def eval_config_for(pool: hardware.HardwarePool, evaluation: EvalConfig) -> EvalConfig:
    ecfg = copy.deepcopy(evaluation)
    ecfg.peak_gbps = pool.peak_gbps
    ecfg.peak_tflops = hardware.peak_table(pool)
    if not pool.is_gpu:
        ecfg.device = Device.cpu
    return ecfg


NOW = Backoff(first_s=0.0, jitter=0.0)  # a lost candidate is queued again at once


class _FreshProcess:
    """A slot of `engine.mode=task`: each call runs the candidate in a GPU-pinned Ray task, a
    fresh process, so a group of them has at most one task per GPU at a time."""

    def __init__(self, fn: Any, ecfg: EvalConfig) -> None:
        self.evaluate = SimpleNamespace(
            remote=lambda task, cand, aot=None: fn.remote(ecfg, task, cand, aot))


class EvaluatorGroup(Dispatch):
    def __init__(self, pool: hardware.HardwarePool, engine: EngineConfig, evaluation: EvalConfig,
                 n_todo: int = 0, handles: list[Any] | None = None, *,
                 models: Sequence[ModelConfig] = (), batch: int = 0, depth: int = 1) -> None:
        """`models`: the sweep's, whose vLLM replicas may hold GPUs of the pool. `handles`:
        evaluators to use instead of starting actors (scripts/bench/bench_scale.py drives the real
        dispatch with simulated evaluators). `batch` (else engine.eval_batch, else
        1) candidates per call and `depth` calls in flight per evaluator: with instant verdicts
        (the engine benchmark's `mode=noop`) the Ray round trip is the cost, so calls carry many
        and overlap; a real evaluator takes one at a time (timing has the GPU alone)."""
        import ray

        self.elastic = handles is None and pool.is_gpu and scaling.role_cluster()
        if self.elastic:
            pool = hardware.on_role_cluster(pool)
        self.ray, self.pool, self.mode = ray, pool, engine.mode
        self.compiler: Any = None  # compile_workers.CompileWorkers, set once they are up
        self.aot_always = engine.aot_compile == "always"
        self.retries, self.stats = engine.retries, GroupStats()
        self.ecfg = eval_config_for(pool, evaluation)
        self.opts = dict(hardware.ray_options(pool), num_cpus=1)
        self.per_gpu = max(1, engine.evaluators_per_gpu) if pool.is_gpu else 1
        if self.per_gpu > 1:  # k evaluators per GPU: Ray packs them by the fractional request
            self.opts["num_gpus"] = self.opts["num_gpus"] / self.per_gpu
            self.opts["resources"] = {k: v / self.per_gpu
                                      for k, v in self.opts.get("resources", {}).items()}
        self.reserved = 0 if self.elastic or handles is not None else \
            generation_reserve(pool, models)
        n = len(handles) if handles is not None else self._size(engine, n_todo)
        self.demand = scaling.evaluator_demand(self.opts, n)
        self.injected, self.fixed = handles is not None, engine.evaluators > 0
        self.restarts = self.mode != "task"  # actors (or handles like them), not task slots
        task_mode = self.mode == "task" and not self.injected
        self.batch = 1 if task_mode else max(1, batch or engine.eval_batch or 1)
        self.members = ActorGroup(self._members(handles, n), cap=1 if task_mode else depth,
                                  ready="info", name=f"evaluator of pool {pool.name}",
                                  owned=not self.injected and not task_mode,
                                  revival=Revival(timeout_s=inf if self.elastic else 300.0),
                                  on_up=self._came_up)
        self.ready_s = max(engine.actor_ready_s, engine.pool_wait_s) if self.elastic \
            else engine.actor_ready_s
        self._lane: PerLoop[Lane] = PerLoop(self._bind)
        self._pids: dict[Any, int] = {}  # each evaluator's process, to tell a restarted one

    def _members(self, handles: list[Any] | None, n: int) -> list[Any]:
        from kbx_ray.evaluate.parent.actor import EvaluatorActor, evaluate_in_fresh_process

        if handles is not None:
            return list(handles)
        if self.mode == "task":
            fn = evaluate_in_fresh_process.options(max_retries=0, **self.opts)
            return [_FreshProcess(fn, self.ecfg) for _ in range(max(n, 1))]
        self._new_actor = lambda: EvaluatorActor.options(max_restarts=-1, **self.opts).remote(
            self.ecfg, self.mode == "noop")
        return [self._new_actor() for _ in range(n)]

    @property
    def actors(self) -> list[Any]:
        return self.members.handles

    def _size(self, engine: EngineConfig, n_todo: int) -> int:
        if self.elastic:  # generation has nodes of its own; pending evaluators are the demand
            live = actors_for(self.pool, 0, 0, self.per_gpu) if pool_gpus(self.pool) else 0
            return scaling.evaluator_target(engine, live, n_todo)
        return actors_for(self.pool, engine.evaluators, self.reserved, self.per_gpu)

    def grow(self) -> int:
        """Elastic groups: one more evaluator per slot of the pool's nodes beyond those it has
        (nodes started for another reason, or min_workers raised mid-sweep); how many it added.
        Those asked for at start need nothing here: they were pending, and start when placed."""
        if not self.elastic or self.fixed or not self.restarts or self.injected:
            return 0
        live = actors_for(self.pool, 0, 0, self.per_gpu) if pool_gpus(self.pool) else 0
        new = [self._new_actor() for _ in range(live - len(self.actors))]
        self.members.grow(new)
        if new:
            log.info("pool %s: %d more evaluator(s) for nodes that joined", self.pool.name,
                     len(new))
        return len(new)

    async def start(self) -> None:
        """Hand out only actors that came up: one that cannot be placed (too few CPUs or GPUs of
        the type) would otherwise take candidates and never answer."""
        if not self.restarts or self.injected:
            self.stats.up = len(self.actors)
            return
        asked = len(self.actors)
        infos = await self.members.start(self.ready_s, first=self.elastic)
        self._pids = {a: i.get("pid") for a, i in infos.items() if isinstance(i, dict)}
        if not infos:
            self.close()
            raise ConfigError(f"no evaluator for pool {self.pool.name!r} started within "
                              f"{self.ready_s:g} s: the cluster lacks free {self.opts} "
                              "(add nodes, raise engine.actor_ready_s for a slow autoscaler, or "
                              "lower engine.evaluators)")
        self.stats.up = len(infos)
        if self.elastic:
            log.info("pool %s: %d of %d evaluators up; the rest start as their nodes join",
                     self.pool.name, len(infos), asked)
        elif len(infos) < asked:
            log.warning("pool %s: %d of %d evaluators started (not enough free resources for the "
                        "rest); going on with %d", self.pool.name, len(infos), asked, len(infos))

    def _came_up(self, actor: Any, info: Any) -> None:
        """An evaluator answers again (restarted, or its node joined): its new pid."""
        if isinstance(info, dict):
            self._pids[actor] = info.get("pid")
        self.stats.up = self.members.n_up

    def close(self) -> None:
        """End the evaluators now, not when the last handle is collected: a driver that keeps
        the sweep's exception (a notebook, a test) would otherwise keep their CPUs and GPUs."""
        lane = self._lane.current()
        for t in [lane.dispatcher, *lane.calls] if lane is not None else []:
            if t is not None and not t.done():
                t.cancel()
        self._lane.reset()
        self.members.close()

    async def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        """Queue the candidate; the next free evaluator takes it (with others queued behind it,
        up to `batch`). An evaluator that dies mid-call is awaited back and the candidates it held
        are queued again, `retries` times; then each is recorded as `infra_error`. With compile
        workers (engine.aot_compile) its kernels are compiled for this pool's sm_XX first, and
        ride with it to the evaluator."""
        req = Request(task, cand)
        if self.compiler is not None and self.pool.compute_capability:
            arch = self.pool.compute_capability
            req.aot = await self.compiler.compile(task, cand, arch) if self.aot_always \
                else self.compiler.start_compile(task, cand, arch)
        try:
            return await retry(partial(self._queued, req), attempts=self.retries + 1,
                               transient=(EvaluatorLost,), backoff=NOW,
                               counts=partial(self._counts, req))
        except EvaluatorLost as e:
            self.stats.done += 1
            self.stats.failed += 1
            return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id,
                              stage=Stage.COMPILE, error_kind=ErrorKind.INFRA_ERROR,
                              error_msg=f"evaluator died {self.retries + 1} times: {e}")

    async def _queued(self, req: Request) -> EvalResult:
        req.future = asyncio.get_running_loop().create_future()
        self.stats.waiting += 1
        self._lane.get().put(req)
        return await req.future

    def _counts(self, req: Request, e: BaseException) -> bool:
        """Whether the loss is one of the candidate's tries: not while its evaluator's node left
        (up to MOVES times)."""
        if isinstance(e, NodeLost) and req.moves < MOVES:
            req.moves += 1
            self.stats.lost += 1
            log.warning("pool %s lost an evaluator with its node; %s queued again",
                        self.pool.name, req.task.task_id)
            return False
        req.tries += 1
        self.stats.retried += 1
        log.warning("evaluator on pool %s died on %s (attempt %d/%d): %s", self.pool.name,
                    req.task.task_id, req.tries, self.retries + 1, e)
        return True

