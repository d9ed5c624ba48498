"""Driver-side load balancing over Ray actor replicas: least requests in flight, capped per replica.

Every prompt of a round is submitted at once. The cap (about 1.1 x the engine's max_num_seqs) keeps
each engine's batch full with a small queue behind it, instead of piling thousands of requests onto
one replica while another idles. A call that meets a dead actor (RayActorError; the actor restarts
by its `max_restarts`) is retried once: on another replica when there is one, else on the same one
once it has restarted.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kbx_ray.retry import Backoff, poll, retry

log = logging.getLogger(__name__)


class ReplicaTally:
    """Tokens, latency and truncations of the generations one replica returned."""

    def __init__(self) -> None:
        self.calls = self.tokens = self.truncated = 0
        self.latency_s = 0.0
        self.since = time.monotonic()

    def add(self, out: Any) -> None:
        for g in out if isinstance(out, list) else [out]:
            if hasattr(g, "completion_tokens") and hasattr(g, "latency_s"):
                self.calls += 1
                self.tokens += int(g.completion_tokens or 0)
                self.latency_s += float(g.latency_s or 0.0)
                self.truncated += getattr(g, "finish_reason", "") == "length"

    def metrics(self) -> dict[str, float]:
        if not self.calls:
            return {}
        return {"completion_tokens": float(self.tokens),
                "mean_latency_s": self.latency_s / self.calls,
                "truncation_rate": self.truncated / self.calls,
                "tokens_per_s": self.tokens / max(time.monotonic() - self.since, 1e-9)}


class ReplicaPool:
    def __init__(self, replicas: list[Any], cap: int, restart_timeout_s: float = 3600.0) -> None:
        if not replicas or cap < 1:
            raise ValueError("a replica pool needs at least one replica and a cap of at least 1")
        self.replicas = list(replicas)
        self.cap = cap
        self.restart_timeout_s = restart_timeout_s  # how long a retry waits for a restart
        self.inflight = [0] * len(replicas)
        self.peak = [0] * len(replicas)     # most requests in flight seen per replica
        self.served = [0] * len(replicas)   # calls completed per replica
        self.gen = [ReplicaTally() for _ in replicas]  # what each replica generated
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _condition(self) -> asyncio.Condition:
        """One condition per event loop: the engine runs each sweep in a fresh loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._cond, self._loop = asyncio.Condition(), loop
            self.inflight = [0] * len(self.replicas)
        assert self._cond is not None
        return self._cond

    async def _acquire(self, avoid: int | None = None) -> int:
        cond = self._condition()
        async with cond:
            while True:
                open_ = [i for i, n in enumerate(self.inflight) if n < self.cap]
                if open_:
                    pick = min(open_, key=lambda i: (i == avoid, self.inflight[i], i))
                    self.inflight[pick] += 1
                    self.peak[pick] = max(self.peak[pick], self.inflight[pick])
                    return pick
                await cond.wait()

    async def _release(self, i: int) -> None:
        cond = self._condition()
        async with cond:
            self.inflight[i] -= 1
            cond.notify()

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`replica.method.remote(*args, **kwargs)` on the least busy replica, awaited."""
        import ray

        avoid: list[int] = []  # the replica that died on the first attempt

        async def once() -> Any:
            i = await self._acquire(avoid[0] if avoid else None)
            try:
                if avoid and i == avoid[0]:  # the only replica with room is the one that died
                    await self._wait_alive(i)
                out = await getattr(self.replicas[i], method).remote(*args, **kwargs)
                self.served[i] += 1
                self.gen[i].add(out)
                return out
            except ray.exceptions.RayActorError:
                avoid[:] = [i]
                raise
            finally:
                await self._release(i)

        def warn(e: BaseException, attempt: int, wait: float) -> None:
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            log.warning("replica %d died during %s (retrying once): %s", avoid[0], method, line)

        return await retry(once, attempts=2, transient=(ray.exceptions.RayActorError,),
                           backoff=Backoff(first_s=0.0), on_retry=warn)

    async def _wait_alive(self, i: int) -> None:
        """Wait while replica i restarts (a vLLM engine reloads for minutes); raise if it is gone
        for good (ActorDiedError) or is still restarting after `restart_timeout_s`."""
        import ray

        await poll(self.replicas[i].__ray_ready__.remote, timeout_s=self.restart_timeout_s,
                   transient=(ray.exceptions.ActorUnavailableError,))

    async def broadcast(self, method: str, *args: Any) -> list[Any]:
        """Call `method` on every replica at once (readiness checks, stats)."""
        return list(await asyncio.gather(*(getattr(r, method).remote(*args) for r in self.replicas)))
