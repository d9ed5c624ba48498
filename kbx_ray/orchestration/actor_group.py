"""One group of Ray actors, for the evaluators, the compile workers and the vLLM replicas alike.
More: kbx_ray/orchestration/README.md, `actor_group.py`.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from kbx_ray.orchestration.per_loop import PerLoop
from kbx_ray.orchestration.retry import Backoff, poll, retry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Revival:
    """How a lost member is waited for: its ready method is asked until it answers."""
    timeout_s: float = 300.0    # then it takes work again (its calls fail fast if it is gone)
    backoff: Backoff = Backoff(first_s=0.2, max_s=5.0, factor=1.5, jitter=0.0)
    final_death: bool = False   # ActorDiedError is final (a restart budget); else any actor error
    #                             means "not back yet" (max_restarts=-1)


@dataclass(eq=False)
class Member:
    handle: Any
    up: bool = True             # answers calls (not pending, not restarting)
    inflight: int = 0           # calls on it now, in this event loop
    peak: int = 0               # the most calls it held at once
    served: int = 0             # calls it completed
    freed: int = 0              # when it last had a slot freed (the group's count): ties go to
    #                             the member idle longest, so idle members take turns


@dataclass
class _Here:
    loop: asyncio.AbstractEventLoop
    cond: asyncio.Condition
    reviving: dict[Member, asyncio.Task] = field(default_factory=dict)


class ActorGroup:
    def __init__(self, handles: list[Any], *, cap: int = 1, ready: str = "__ray_ready__",
                 revival: Revival = Revival(), owned: bool = True, name: str = "actor",
                 on_up: Callable[[Any, Any], None] | None = None) -> None:
        """`owned`: the group ends its members (shrink, close); `on_up(handle, answer)` is told of
        each member that came back, with its ready method's answer."""
        self.members = [Member(h) for h in handles]
        self.cap, self.ready, self.revival = cap, ready, revival
        self.owned, self.name, self.on_up = owned, name, on_up
        self._freed = itertools.count(1)
        self._here: PerLoop[_Here] = PerLoop(self._bind)

    @property
    def handles(self) -> list[Any]:
        return [m.handle for m in self.members]

    @property
    def n_up(self) -> int:
        return sum(m.up for m in self.members)

    def _bind(self) -> _Here:
        here = _Here(asyncio.get_running_loop(), asyncio.Condition())
        for m in self.members:
            m.inflight = 0  # calls of an earlier loop ended with it
            if not m.up:
                self._revive_in(here, m)
        return here

    async def start(self, ready_s: float, *, first: bool = False) -> dict[Any, Any]:
        """Wait up to `ready_s` for every member to answer its ready method, and end those that
        did not (`first`: for one of them; the others stay, pending, and take work when they
        answer, however late). {handle: its answer, or the exception} of the members that did."""
        import ray

        if not self.members:
            return {}
        pending = {getattr(m.handle, self.ready).remote(): m for m in self.members}
        ready, _ = await asyncio.to_thread(ray.wait, list(pending),
                                           num_returns=1 if first else len(pending),
                                           timeout=ready_s)
        answers = await asyncio.gather(*ready, return_exceptions=True)
        up = {pending[r].handle: a for r, a in zip(ready, answers)}
        if not first:
            self.shrink([m.handle for m in self.members if m.handle not in up])
            return up
        here = self._here.get()
        for m in self.members:
            m.up = m.handle in up
            if not m.up:
                self._revive_in(here, m)
        return up

    def grow(self, handles: list[Any]) -> None:
        """Add members that are not up yet: each takes work once it answers its ready method."""
        new = [Member(h, up=False) for h in handles]
        self.members += new
        here = self._here.current()
        for m in new if here is not None else []:
            self._revive_in(here, m)

    def shrink(self, handles: list[Any]) -> None:
        """Remove these members (ended, if the group owns them)."""
        gone = {id(h) for h in handles}
        self.members = [m for m in self.members if id(m.handle) not in gone]
        if self.owned:
            import ray

            for h in handles:
                ray.kill(h, no_restart=True)

    def close(self) -> None:
        """Stop the waits and end the members now, not when the last handle is collected."""
        here = self._here.current()
        for t in here.reviving.values() if here is not None else []:
            if not t.done():
                t.cancel()
        self._here.reset()
        if self.owned:  # the members stay listed (what they were is still asked after)
            import ray

            for m in self.members:
                ray.kill(m.handle, no_restart=True)

    def has_room(self) -> bool:
        self._here.get()
        return any(m.up and m.inflight < self.cap for m in self.members)

    async def acquire(self, avoid: Member | None = None) -> Member:
        """A slot on the least busy member that is up (`avoid` last; of those equally busy, the
        one idle longest), once one has room."""
        cond = self._here.get().cond
        async with cond:
            while True:
                free = [m for m in self.members if m.up and m.inflight < self.cap]
                if free:
                    pick = min(free, key=lambda m: (m is avoid, m.inflight, m.freed))
                    pick.inflight += 1
                    pick.peak = max(pick.peak, pick.inflight)
                    return pick
                await cond.wait()

    async def release(self, m: Member) -> None:
        cond = self._here.get().cond
        async with cond:
            m.inflight -= 1
            m.freed = next(self._freed)
            cond.notify()

    async def call(self, method: str, *args: Any, attempts: int = 2,
                   timeout_s: float | None = None, **kwargs: Any) -> Any:
        """`member.method.remote(*args, **kwargs)` on the least busy member, awaited (within
        `timeout_s`). A member that dies meanwhile (RayActorError) costs an attempt: the next goes
        to another member, or to the same one once it answers again."""
        import ray

        avoid: list[Member] = []  # the member that died on the last attempt

        async def once() -> Any:
            m = await self.acquire(avoid[0] if avoid else None)
            try:
                if avoid and m is avoid[0]:  # the only member with room is the one that died
                    await self.wait_alive(m)
                ref = getattr(m.handle, method).remote(*args, **kwargs)
                out = await (ref if timeout_s is None else asyncio.wait_for(ref, timeout_s))
                m.served += 1
                self.served_one(m, out)
                return out
            except ray.exceptions.RayActorError:
                avoid[:] = [m]
                raise
            finally:
                await self.release(m)

        def warn(e: BaseException, attempt: int, wait: float) -> None:
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            again = "retrying once" if attempts == 2 else f"attempt {attempt} of {attempts}"
            log.warning("%s %d died during %s (%s): %s", self.name,
                        self.members.index(avoid[0]), method, again, line)

        return await retry(once, attempts=attempts, transient=(ray.exceptions.RayActorError,),
                           backoff=Backoff(first_s=0.0), on_retry=warn)

    def served_one(self, m: Member, out: Any) -> None:
        """Told of each answer `call` returns (a subclass tallies them)."""

    async def broadcast(self, method: str, *args: Any) -> list[Any]:
        """Call `method` on every member at once (readiness checks, stats)."""
        return list(await asyncio.gather(*(getattr(m.handle, method).remote(*args)
                                           for m in self.members)))

    async def wait_alive(self, m: Member) -> Any:
        """Ask the member's ready method until it answers (Ray restarts it by `max_restarts`);
        the answer. Raises after `revival.timeout_s`, or at once when it is gone for good."""
        import ray

        gone = ray.exceptions.ActorUnavailableError if self.revival.final_death \
            else ray.exceptions.RayActorError
        return await poll(getattr(m.handle, self.ready).remote, transient=(gone,),
                          timeout_s=self.revival.timeout_s, backoff=self.revival.backoff)

    def lost(self, m: Member) -> None:
        """The member died holding work: it takes none until it answers again."""
        m.up = False
        self._revive_in(self._here.get(), m)

    def _revive_in(self, here: _Here, m: Member) -> None:
        if m not in here.reviving or here.reviving[m].done():
            here.reviving[m] = here.loop.create_task(self._revive(m))

    async def _revive(self, m: Member) -> None:
        answer: Any = None
        try:
            answer = await self.wait_alive(m)
        except Exception as e:  # noqa: BLE001 - still down after the wait: its calls will say
            log.warning("%s did not come back within %g s (%s); handing it work again", self.name,
                        self.revival.timeout_s, type(e).__name__)
        m.up = True
        if self.on_up is not None:
            self.on_up(m.handle, answer)
        cond = self._here.get().cond
        async with cond:
            cond.notify_all()
