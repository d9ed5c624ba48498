"""One retry policy: exponential backoff with jitter, for calls that may fail for a while.

`retry` re-runs a coroutine on the exceptions it is told are transient and re-raises the last one
once the attempts are spent, so the caller turns it into its own one-line message. `poll` waits for
something to come up (an actor restarting) within a time budget. The actor groups
(orchestration/actor_group.py: calls on a lost actor, waits for its restart), the evaluator groups
(a candidate whose evaluator died) and the openai backend use them.
"""
from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
Transient = tuple[type[BaseException], ...]


@dataclass(frozen=True)
class Backoff:
    first_s: float = 1.0    # the first wait
    max_s: float = 60.0     # no wait is longer
    factor: float = 2.0     # each wait is this many times the last
    jitter: float = 0.1     # up to this fraction added at random: clients do not retry in step

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt `attempt` (0 = the first), jitter included."""
        base = min(self.max_s, self.first_s * self.factor ** min(attempt, 64))
        return base * (1 + self.jitter * random.random())


async def retry(call: Callable[[], Awaitable[T]], *, attempts: int, transient: Transient,
                backoff: Backoff = Backoff(),
                wait_s: Callable[[BaseException], float | None] | None = None,
                on_retry: Callable[[BaseException, int, float], None] | None = None,
                counts: Callable[[BaseException], bool] | None = None) -> T:
    """`await call()`, again after a backoff on each `transient` exception, at most `attempts` times
    in all. `wait_s(exc)` may name the wait itself (a server's Retry-After); `on_retry(exc, attempt,
    wait)` is told of each retry (1 = the first); `counts(exc)` False: this failure does not use up
    an attempt (an evaluator's node left: not the candidate's doing). The last exception propagates
    unchanged."""
    if attempts < 1:
        raise ValueError("retry needs at least one attempt")
    used = failed = 0
    while True:
        try:
            return await call()
        except transient as e:
            used += counts is None or counts(e)
            if used >= attempts:
                raise
            asked = wait_s(e) if wait_s else None
            wait = backoff.delay(failed) if asked is None else asked
            failed += 1
            if on_retry:
                on_retry(e, failed, wait)
            if wait > 0:
                await asyncio.sleep(wait)


def log_retry(what: str, attempts: int) -> Callable[[BaseException, int, float], None]:
    """An `on_retry` that logs one warning line per retry."""

    def warn(e: BaseException, attempt: int, wait: float) -> None:
        msg = " ".join(str(e).split()) or type(e).__name__
        log.warning("%s: %s (attempt %d of %d); retrying in %.1f s", what, msg[:300], attempt,
                    attempts, wait)

    return warn


async def poll(check: Callable[[], Awaitable[T]], *, transient: Transient, timeout_s: float,
               backoff: Backoff = Backoff(first_s=0.1, max_s=10.0, jitter=0.0)) -> T:
    """`await check()` until it stops raising `transient`; after `timeout_s` of waiting the last
    exception propagates."""
    waited, attempt = 0.0, 0
    while True:
        try:
            return await check()
        except transient:
            if waited >= timeout_s:
                raise
        wait = backoff.delay(attempt)
        await asyncio.sleep(wait)
        waited, attempt = waited + wait, attempt + 1
