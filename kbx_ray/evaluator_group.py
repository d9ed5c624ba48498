"""An evaluator group: the evaluator actors of one hardware pool, with bounded calls in flight.
More: kbx_ray/README.md, `evaluator_group.py`.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from math import inf
from types import SimpleNamespace
from typing import Any, Sequence

from kbx_ray import hardware, scaling
from kbx_ray.actor_group import ActorGroup, Member, Revival
from kbx_ray.compile_workers import ready_result
from kbx_ray.config import ConfigError, EngineConfig, ModelConfig
from kbx_ray.evaluate.settings import Device, EvalConfig
from kbx_ray.evaluator_loss import MOVES, EvaluatorLost, NodeLost, lost, worker_sigkilled
from kbx_ray.per_loop import PerLoop
from kbx_ray.retry import Backoff, retry
from kbx_ray.scaling import actors_for, generation_reserve, pool_gpus
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Stage, Task

log = logging.getLogger(__name__)


@dataclass
class GroupStats:
    """What one evaluator group has done so far, for its progress line and the benchmarks."""
    done: int = 0               # verdicts given (infra_error ones included)
    failed: int = 0             # ... of which not exec_ok
    retried: int = 0            # calls that ended with the evaluator dead (each a candidate's try)
    in_flight: int = 0          # candidates on an evaluator now
    waiting: int = 0            # candidates queued for one
    started: float = field(default_factory=time.monotonic)
    lost: int = 0               # candidates queued again after their evaluator's node left
    up: int = 0                 # evaluators up now (elastic groups: changes as nodes come and go)

    def line(self, name: str, n_actors: int) -> str:
        rate = self.done / max(1e-9, time.monotonic() - self.started)
        return (f"pool {name}: {self.up}/{n_actors} evaluators up, {self.in_flight} running, "
                f"{self.waiting} queued, "
                f"{self.done} done ({self.failed} failed, {self.retried} retried), {rate:.2f}/s")


def eval_config_for(pool: hardware.HardwarePool, evaluation: EvalConfig) -> EvalConfig:
    ecfg = copy.deepcopy(evaluation)
    ecfg.peak_gbps = pool.peak_gbps
    ecfg.peak_tflops = hardware.peak_table(pool)
    if not pool.is_gpu:
        ecfg.device = Device.cpu
    return ecfg


NOW = Backoff(first_s=0.0, jitter=0.0)  # a lost candidate is queued again at once


@dataclass
class _Request:
    task: Task
    cand: Candidate
    aot: Any = None             # evaluate/aot.AotResult, a future of one (compile_workers), or None
    future: asyncio.Future | None = None  # this try's verdict
    tries: int = 0              # calls that ended with the evaluator dead
    moves: int = 0              # calls that ended with the evaluator's node gone (not counted)


@dataclass
class _Lane:
    """Per event loop: the requests waiting, and the dispatcher that hands them to evaluators."""
    queue: deque[_Request] = field(default_factory=deque)
    work: asyncio.Event = field(default_factory=asyncio.Event)  # set while `queue` holds any
    dispatcher: asyncio.Task | None = None
    calls: set[asyncio.Task] = field(default_factory=set)

    def put(self, r: _Request) -> None:
        self.queue.append(r)
        self.work.set()

    def take(self, n: int) -> list[_Request]:
        batch = [self.queue.popleft() for _ in range(min(n, len(self.queue)))]
        if not self.queue:
            self.work.clear()
        return batch


class _FreshProcess:
    """A slot of `engine.mode=task`: each call runs the candidate in a GPU-pinned Ray task, a
    fresh process, so a group of them has at most one task per GPU at a time."""

    def __init__(self, fn: Any, ecfg: EvalConfig) -> None:
        self.evaluate = SimpleNamespace(
            remote=lambda task, cand, aot=None: fn.remote(ecfg, task, cand, aot))


class EvaluatorGroup:
    probe_s = 10.0  # how long an evaluator whose worker was SIGKILLed has to say it still runs

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
        self._lane: PerLoop[_Lane] = PerLoop(self._bind)
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
        req = _Request(task, cand)
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

    async def _queued(self, req: _Request) -> EvalResult:
        req.future = asyncio.get_running_loop().create_future()
        self.stats.waiting += 1
        self._lane.get().put(req)
        return await req.future

    def _counts(self, req: _Request, e: BaseException) -> bool:
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

    def _bind(self) -> _Lane:
        """One dispatcher per event loop (the engine runs each sweep in a fresh one)."""
        lane = _Lane()
        self.stats.waiting = self.stats.in_flight = 0
        lane.dispatcher = asyncio.get_running_loop().create_task(self._dispatch(lane))
        return lane

    async def _dispatch(self, lane: _Lane) -> None:
        """The queue's head goes to the least busy evaluator that is up, with up to `batch` - 1
        requests queued behind it."""
        while True:
            await lane.work.wait()
            member = await self.members.acquire()
            if not lane.queue:  # taken meanwhile by an evaluator that stayed busy
                await self.members.release(member)
                continue
            call = asyncio.get_running_loop().create_task(
                self._serve(member, lane, lane.take(self.batch)))
            lane.calls.add(call)
            call.add_done_callback(lane.calls.discard)

    async def _serve(self, member: Member, lane: _Lane, batch: list[_Request]) -> None:
        """Evaluate the batch, and the next ones while requests wait: a call leaves as soon as the
        last returns (a hand-off through the dispatcher would cost the event loop's turns)."""
        try:
            while batch:
                self.stats.waiting -= len(batch)
                self.stats.in_flight += len(batch)
                try:
                    died = await self._settle_all(member.handle, batch)
                finally:
                    self.stats.in_flight -= len(batch)
                if died and self.restarts:
                    self.members.lost(member)  # no work for it until Ray has restarted it
                    self.stats.up = self.members.n_up
                    return
                batch = lane.take(self.batch)
        finally:
            await self.members.release(member)

    async def _settle_all(self, actor: Any, batch: list[_Request]) -> bool:
        """Evaluate a batch on one evaluator and settle its futures; True if the evaluator died
        (the call failed, or a SIGKILLed worker's verdict came from an evaluator since replaced)."""
        try:
            results = await self._results(actor, batch)
            replaced = await self._replaced(actor) \
                if self.restarts and any(map(worker_sigkilled, results)) else ""
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError,
                self.ray.exceptions.NodeDiedError) as e:
            self._requeue(batch, e)
            return True
        except Exception as e:  # noqa: BLE001 - the callers decide; this evaluator goes on
            for r in batch:
                if r.future is not None and not r.future.done():
                    r.future.set_exception(e)
            return False
        if replaced:
            self._requeue(batch, replaced)
            return True
        for r, res in zip(batch, results):
            self._settle(r, res)
        return False

    async def _results(self, actor: Any, batch: list[_Request]) -> list[EvalResult]:
        # kernels compiled ahead, if there by now (no look at all without compile workers)
        aot = [ready_result(r.aot) for r in batch] if self.compiler is not None \
            else [None] * len(batch)
        if len(batch) == 1:
            return [await actor.evaluate.remote(batch[0].task, batch[0].cand, aot[0])]
        return await actor.evaluate_batch.remote([(r.task, r.cand, a) for r, a in zip(batch, aot)])

    async def _replaced(self, actor: Any) -> str:
        """Why an evaluator whose sandbox worker was SIGKILLed is no longer the process that
        evaluated ("" if it is; raises RayActorError if it is dead). Ray can reap the sandbox worker
        before the actor it kills, which then reports the kill as the candidate's crash; a worker
        killed under a live actor (a resource limit) is the candidate's own crash."""
        try:
            pid = (await asyncio.wait_for(actor.info.remote(), self.probe_s)).get("pid")
        except (TimeoutError, asyncio.TimeoutError):  # one class from Python 3.11 on
            return f"evaluator silent for {self.probe_s:g} s after its worker was SIGKILLed"
        old = self._pids.setdefault(actor, pid)
        return "" if pid == old else f"evaluator restarted mid-call (pid {old} -> {pid})"

    def _settle(self, r: _Request, res: EvalResult) -> None:
        if r.future is None or r.future.done():  # the cell was cancelled
            return
        problem = hardware.check_gpu_name(self.pool, res.gpu_name or res.device) \
            if self.ecfg.device != "cpu" or not self.pool.is_gpu else None
        if problem:
            r.future.set_exception(ConfigError(problem))
            return
        self.stats.done += 1
        self.stats.failed += 0 if res.exec_ok else 1
        r.future.set_result(res)

    def _requeue(self, batch: list[_Request], e: BaseException | str) -> None:
        """Each candidate of the call tries again (evaluator_loss.lost: evaluate's retry counts
        it unless the evaluator went with its node)."""
        for r in batch:
            if r.future is not None and not r.future.done():
                r.future.set_exception(lost(e, self.elastic))
