"""Evaluator pools: one set of evaluator actors per hardware pool, with bounded calls in flight.

Each actor evaluates one candidate at a time (timing has the GPU to itself): requests queue in the
pool, and each actor's dispatcher takes the next one when the actor is free. An actor that dies
mid-candidate is restarted by Ray (`max_restarts`) and the candidate is retried; after `retries` it
is recorded as `infra_error`. `mode=task` instead runs one GPU-pinned Ray task per candidate in a
fresh process, and `mode=noop` answers instantly, to measure the engine's own overhead: there the
Ray round trip is the whole cost, so a call carries up to `engine.eval_batch` candidates and two
calls overlap per actor.

Elastic on a cluster laid out like cluster.yaml (kbx-role labels): the pool creates its target
number of evaluators at once, and those whose node is not up yet stay pending, which is the demand
the autoscaler answers; each evaluator's dispatcher starts taking candidates when it comes up, so
the pool grows as nodes join. An evaluator whose node leaves is restarted by Ray wherever there is
room (pending again until a node joins); what it held is queued again without counting against
the candidate's retries, since losing a node is not the candidate's doing.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kbx_ray import hardware, scaling
from kbx_ray.compile_pool import ready_result
from kbx_ray.config import Config, ConfigError
from kbx_ray.scaling import actors_for, generation_reserve, pool_gpus  # noqa: F401 - re-exported
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Task

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    retried: int = 0
    in_flight: int = 0
    waiting: int = 0
    started: float = field(default_factory=time.monotonic)

    lost: int = 0               # candidates queued again after their evaluator's node left
    up: int = 0                 # evaluators up now (elastic pools: changes as nodes come and go)

    def line(self, name: str, n_actors: int) -> str:
        rate = self.done / max(1e-9, time.monotonic() - self.started)
        return (f"pool {name}: {self.up}/{n_actors} evaluators up, {self.in_flight} running, "
                f"{self.waiting} queued, "
                f"{self.done} done ({self.failed} failed, {self.retried} retried), {rate:.2f}/s")


def eval_config_for(pool: hardware.HardwarePool, cfg: Config) -> Any:
    ecfg = copy.deepcopy(cfg.evaluation)
    ecfg.peak_gbps = pool.peak_gbps
    ecfg.peak_tflops = hardware.peak_table(pool)
    if not pool.is_gpu:
        ecfg.device = "cpu"
    return ecfg


def _node_lost(e: BaseException | str, elastic: bool) -> bool:
    """The evaluator died with its node (terminated, preempted), not by the candidate. On a role
    cluster an evaluator that stops answering (ActorUnavailableError: the call "may or may not have
    run", before the GCS has noticed the node is gone) counts so too: the sandbox keeps candidates
    from taking their evaluator down, and what is left there is lost nodes. On one machine it is
    the candidate's try, as before."""
    if getattr(e, "preempted", False) or type(e).__name__ == "NodeDiedError":
        return True
    if elastic and type(e).__name__ == "ActorUnavailableError":
        return True
    return any(s in str(e) for s in ("its node has died", "node was terminated"))


@dataclass
class _Request:
    task: Task
    cand: Candidate
    future: asyncio.Future
    tries: int = 0              # calls that ended with the evaluator dead
    moves: int = 0              # calls that ended with the evaluator's node gone (not counted)
    last: str = ""              # how the last one died
    aot: Any = None             # evaluate/aot.AotResult, or a future of one (compile_pool), or None


def _worker_sigkilled(res: EvalResult) -> bool:
    """The verdict is the sandbox worker's death by SIGKILL (sandbox.Sandbox._died)."""
    return res.error_kind == ErrorKind.CRASH and "killed by SIGKILL" in res.error_msg


def batching(cfg: Config) -> tuple[int, int]:
    """(candidates per evaluator call, calls in flight per evaluator). A real evaluator takes one
    candidate at a time (timing has the GPU alone, a free evaluator takes the next); with instant
    verdicts (`mode=noop`) the Ray round trip is the cost, so calls carry many and overlap."""
    batch = cfg.engine.eval_batch or (64 if cfg.engine.mode == "noop" else 1)
    return (1, 1) if cfg.engine.mode == "task" else (batch, 2 if cfg.engine.mode == "noop" else 1)


class EvaluatorPool:
    probe_s = 10.0  # how long an evaluator whose worker was SIGKILLed has to say it still runs

    def __init__(self, pool: hardware.HardwarePool, cfg: Config, n_todo: int = 0,
                 handles: list[Any] | None = None) -> None:
        """`handles`: evaluators to use instead of starting actors (scripts/bench/bench_scale.py
        drives the real dispatch with simulated evaluators)."""
        import ray

        from kbx_ray.evaluate.actor import EvaluatorActor, evaluate_in_fresh_process

        self.elastic = handles is None and pool.is_gpu and scaling.role_cluster()
        if self.elastic:
            pool = hardware.on_role_cluster(pool)
        self.ray, self.pool, self.mode = ray, pool, cfg.engine.mode
        self.compiler: Any = None  # compile_pool.CompilePool, set by the engine once it is up
        self.aot_always = cfg.engine.aot_compile == "always"
        self.retries, self.stats = cfg.engine.retries, PoolStats()
        self.ecfg = eval_config_for(pool, cfg)
        self.opts = dict(hardware.ray_options(pool), num_cpus=1)
        per_gpu = max(1, cfg.engine.evaluators_per_gpu) if pool.is_gpu else 1
        if per_gpu > 1:  # k evaluators per GPU: Ray packs them by the fractional request
            self.opts["num_gpus"] = self.opts["num_gpus"] / per_gpu
            self.opts["resources"] = {k: v / per_gpu for k, v in self.opts.get("resources", {}).items()}
        self.reserved = 0 if self.elastic or handles is not None else generation_reserve(pool, cfg)
        n = len(handles) if handles is not None else self._size(cfg, per_gpu, n_todo)
        self.demand = scaling.evaluator_demand(self.opts, n)
        self._up: set[Any] = set()
        self.injected = handles is not None
        if handles is not None:
            self.actors = list(handles)
        elif self.mode == "task":
            self.task_fn = evaluate_in_fresh_process.options(max_retries=0, **self.opts)
            self.actors = [None] * max(n, 1)  # slots: at most one task per GPU at a time
        else:
            self._new_actor = lambda: EvaluatorActor.options(max_restarts=-1, **self.opts).remote(
                self.ecfg, self.mode == "noop")
            self.actors = [self._new_actor() for _ in range(n)]
        self.per_gpu, self.fixed = per_gpu, cfg.engine.evaluators > 0
        self.batch, self.depth = batching(cfg)
        self.ready_s = max(cfg.engine.actor_ready_s, cfg.engine.pool_wait_s) if self.elastic \
            else cfg.engine.actor_ready_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._dispatchers: list[asyncio.Task] = []
        self._pids: dict[Any, int] = {}  # each evaluator's process, to tell a restarted one

    def _size(self, cfg: Config, per_gpu: int, n_todo: int) -> int:
        if self.elastic:  # generation has nodes of its own; pending evaluators are the demand
            live = actors_for(self.pool, 0, 0, per_gpu) if pool_gpus(self.pool) else 0
            return scaling.evaluator_target(self.pool, cfg, live, n_todo)
        return actors_for(self.pool, cfg.engine.evaluators, self.reserved, per_gpu)

    def grow(self) -> int:
        """Elastic pools: one more evaluator per slot of the pool's nodes beyond those it has (nodes
        started for another reason, or min_workers raised mid-sweep); how many it added. Those
        asked for at start need nothing here: they were pending, and start when placed."""
        if not self.elastic or self.fixed or self.mode == "task" or self.injected:
            return 0
        live = actors_for(self.pool, 0, 0, self.per_gpu) if pool_gpus(self.pool) else 0
        new = [self._new_actor() for _ in range(live - len(self.actors))]
        self.actors += new
        if new and self._loop is not None and not self._loop.is_closed():
            self._dispatchers += [self._loop.create_task(self._dispatch(a))
                                  for a in new for _ in range(self.depth)]
        if new:
            log.info("pool %s: %d more evaluator(s) for nodes that joined", self.pool.name, len(new))
        return len(new)

    async def start(self) -> None:
        """Hand out only actors that came up: one that cannot be placed (too few CPUs or GPUs of
        the type) would otherwise take candidates and never answer."""
        if self.mode == "task" or self.injected:
            self.stats.up = len(self.actors)
            return
        pending = {a.info.remote(): a for a in self.actors}
        # elastic: the first one up is enough; the rest join as their nodes do
        ready, _ = await asyncio.to_thread(self.ray.wait, list(pending),
                                           num_returns=1 if self.elastic else len(pending),
                                           timeout=self.ready_s)
        up = [pending[r] for r in ready]
        infos = await asyncio.gather(*ready, return_exceptions=True)
        self._pids = {pending[r]: i.get("pid") for r, i in zip(ready, infos) if isinstance(i, dict)}
        if not up:
            self.close()
            raise ConfigError(f"no evaluator for pool {self.pool.name!r} started within "
                              f"{self.ready_s:g} s: the cluster lacks free {self.opts} "
                              "(add nodes, raise engine.actor_ready_s for a slow autoscaler, or "
                              "lower engine.evaluators)")
        self._up = set(up)
        self.stats.up = len(up)
        if self.elastic:
            log.info("pool %s: %d of %d evaluators up; the rest start as their nodes join",
                     self.pool.name, len(up), len(self.actors))
            self._stop_dispatchers()
            return
        for a in self.actors:
            if a not in up:
                self.ray.kill(a, no_restart=True)
        if len(up) < len(self.actors):
            log.warning("pool %s: %d of %d evaluators started (not enough free resources for the "
                        "rest); going on with %d", self.pool.name, len(up), len(self.actors), len(up))
        self.actors = up
        self._stop_dispatchers()  # the next call dispatches to these

    def close(self) -> None:
        """End the evaluators now, not when the last handle is collected: a driver that keeps
        the sweep's exception (a notebook, a test) would otherwise keep their CPUs and GPUs."""
        self._stop_dispatchers()
        for a in self.actors:
            if a is not None and not self.injected:
                self.ray.kill(a)

    async def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        """Queue the candidate; the next free evaluator takes it (with others queued behind it,
        up to `batch`). An evaluator that dies mid-call is awaited back and the candidates it held
        are queued again, `retries` times; then each is recorded as `infra_error`. With a compile
        pool (engine.aot_compile) its kernels are compiled for this pool's sm_XX first, and ride
        with it to the evaluator."""
        self._dispatch_here()
        aot: Any = None
        if self.compiler is not None and self.pool.compute_capability:
            arch = self.pool.compute_capability
            aot = await self.compiler.compile(task, cand, arch) if self.aot_always \
                else self.compiler.start_compile(task, cand, arch)
        req = _Request(task, cand, asyncio.get_running_loop().create_future(), aot=aot)
        self.stats.waiting += 1
        self._queue.put_nowait(req)
        return await req.future

    def _stop_dispatchers(self) -> None:
        for t in self._dispatchers:
            if not t.done() and not t.get_loop().is_closed():
                t.cancel()
        self._dispatchers, self._loop = [], None

    def _dispatch_here(self) -> None:
        """One dispatcher per evaluator and call in flight, in the running event loop (the engine
        runs each sweep in a fresh one)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop, self._queue = loop, asyncio.Queue()
        self.stats.waiting = self.stats.in_flight = 0
        self._dispatchers = [loop.create_task(self._dispatch(a))
                             for a in self.actors for _ in range(self.depth)]

    async def _dispatch(self, actor: Any) -> None:
        if actor is not None and self.elastic and actor not in self._up:
            await self._await_restart(actor)  # pending: its node has not joined yet
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            self.stats.waiting -= len(batch)
            self.stats.in_flight += len(batch)
            try:
                died = await self._call(actor, batch)
            finally:
                self.stats.in_flight -= len(batch)
            if died and actor is not None:
                await self._await_restart(actor)

    async def _call(self, actor: Any, batch: list[_Request]) -> bool:
        """Evaluate a batch on one evaluator and settle its futures; True if the evaluator died
        (the call failed, or a SIGKILLed worker's verdict came from an evaluator since replaced)."""
        try:
            results = await self._results(actor, batch)
            replaced = await self._replaced(actor) \
                if actor is not None and any(map(_worker_sigkilled, results)) else ""
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.WorkerCrashedError,
                self.ray.exceptions.NodeDiedError) as e:
            self._requeue(batch, e)
            return True
        except Exception as e:  # noqa: BLE001 - the callers decide; this evaluator goes on
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)
            return False
        if replaced:
            self._requeue(batch, replaced)
            return True
        for r, res in zip(batch, results):
            self._settle(r, res)
        return False

    async def _results(self, actor: Any, batch: list[_Request]) -> list[EvalResult]:
        aot = [ready_result(r.aot) for r in batch]  # kernels compiled ahead, if there by now
        if actor is None:
            return [await self.task_fn.remote(self.ecfg, batch[0].task, batch[0].cand, aot[0])]
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
        if r.future.done():  # the cell was cancelled
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
        last = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        moved = _node_lost(e, self.elastic)
        for r in batch:
            if r.future.done():
                continue
            if moved and r.moves < 20:  # its node left: not the candidate's doing
                r.moves += 1
                self.stats.lost += 1
                log.warning("pool %s lost an evaluator with its node; %s queued again",
                            self.pool.name, r.task.task_id)
                self.stats.waiting += 1
                self._queue.put_nowait(r)
                continue
            r.tries, r.last = r.tries + 1, last
            self.stats.retried += 1
            log.warning("evaluator on pool %s died on %s (attempt %d/%d): %s", self.pool.name,
                        r.task.task_id, r.tries, self.retries + 1, last)
            if r.tries <= self.retries:
                self.stats.waiting += 1
                self._queue.put_nowait(r)
                continue
            self.stats.done += 1
            self.stats.failed += 1
            r.future.set_result(EvalResult(
                task_id=r.task.task_id, candidate_id=r.cand.candidate_id, stage="compile",
                error_kind="infra_error",
                error_msg=f"evaluator died {self.retries + 1} times: {r.last}"))

    async def _await_restart(self, actor: Any, timeout_s: float = 300.0) -> None:
        """Wait until Ray has restarted the actor (it answers `info`, with its new pid), so a retry
        is not wasted on an actor that is still coming back. An elastic pool waits as long as it
        takes (a new node may take minutes to boot); meanwhile the evaluator counts as down."""
        self._up.discard(actor)
        self.stats.up = len(self._up)
        deadline = time.monotonic() + (float("inf") if self.elastic else timeout_s)
        delay = 0.2
        while time.monotonic() < deadline:
            try:
                self._pids[actor] = (await actor.info.remote()).get("pid")
                self._up.add(actor)
                self.stats.up = len(self._up)
                return
            except self.ray.exceptions.RayActorError:
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 1.5)
