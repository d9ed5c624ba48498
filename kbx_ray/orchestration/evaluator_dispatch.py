"""An evaluator group's queue and dispatcher: requests -> the least busy evaluator that is up,
each call's verdicts settled, or its candidates queued again when the evaluator died.

evaluator_group.py's `EvaluatorGroup` runs on this: it starts the evaluators and decides what a
loss costs a candidate (evaluator_loss.py); this part only moves requests and verdicts.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbx_ray.config import hardware
from kbx_ray.orchestration.compile_workers import ready_result
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.evaluator_loss import lost, worker_sigkilled
from kbx_ray.types import Candidate, EvalResult, Task

if TYPE_CHECKING:
    from kbx_ray.orchestration.actor_group import ActorGroup, Member
    from kbx_ray.evaluate.settings import EvalConfig
    from kbx_ray.orchestration.per_loop import PerLoop


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


@dataclass
class Request:
    task: Task
    cand: Candidate
    aot: Any = None             # evaluate/aot.AotResult, a future of one (compile_workers), or None
    future: asyncio.Future | None = None  # this try's verdict
    tries: int = 0              # calls that ended with the evaluator dead
    moves: int = 0              # calls that ended with the evaluator's node gone (not counted)


@dataclass
class Lane:
    """Per event loop: the requests waiting, and the dispatcher that hands them to evaluators."""
    queue: deque[Request] = field(default_factory=deque)
    work: asyncio.Event = field(default_factory=asyncio.Event)  # set while `queue` holds any
    dispatcher: asyncio.Task | None = None
    calls: set[asyncio.Task] = field(default_factory=set)

    def put(self, r: Request) -> None:
        self.queue.append(r)
        self.work.set()

    def take(self, n: int) -> list[Request]:
        batch = [self.queue.popleft() for _ in range(min(n, len(self.queue)))]
        if not self.queue:
            self.work.clear()
        return batch


class Dispatch:
    """The dispatching half of an evaluator group (its attributes are set by EvaluatorGroup)."""
    probe_s = 10.0  # how long an evaluator whose worker was SIGKILLed has to say it still runs
    pool: hardware.HardwarePool
    ecfg: EvalConfig
    members: ActorGroup
    stats: GroupStats
    batch: int
    restarts: bool
    elastic: bool
    compiler: Any
    ray: Any
    _lane: PerLoop[Lane]
    _pids: dict[Any, int]

    def _bind(self) -> Lane:
        """One dispatcher per event loop (the engine runs each sweep in a fresh one)."""
        lane = Lane()
        self.stats.waiting = self.stats.in_flight = 0
        lane.dispatcher = asyncio.get_running_loop().create_task(self._dispatch(lane))
        return lane

    async def _dispatch(self, lane: Lane) -> None:
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

    async def _serve(self, member: Member, lane: Lane, batch: list[Request]) -> None:
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

    async def _settle_all(self, actor: Any, batch: list[Request]) -> bool:
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

    async def _results(self, actor: Any, batch: list[Request]) -> list[EvalResult]:
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

    def _settle(self, r: Request, res: EvalResult) -> None:
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

    def _requeue(self, batch: list[Request], e: BaseException | str) -> None:
        """Each candidate of the call tries again (evaluator_loss.lost: evaluate's retry counts
        it unless the evaluator went with its node)."""
        for r in batch:
            if r.future is not None and not r.future.done():
                r.future.set_exception(lost(e, self.elastic))
