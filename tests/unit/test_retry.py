"""orchestration/retry.py: the one retry policy (backoff, transient errors, a server-named wait,
poll)."""
from __future__ import annotations

import asyncio
import time

import pytest

from kbx_ray.orchestration.retry import Backoff, poll, retry


class Flaky:
    """Fails with `exc` the first `n` calls, then answers how many calls it took."""

    def __init__(self, n: int, exc: type[BaseException] = ConnectionError) -> None:
        self.n, self.exc, self.calls = n, exc, 0

    async def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.n:
            raise self.exc(f"failure {self.calls}")
        return self.calls


def test_backoff_doubles_up_to_its_cap_with_bounded_jitter():
    b = Backoff(first_s=1.0, max_s=5.0, jitter=0.0)
    assert [b.delay(i) for i in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    jittered = [Backoff(first_s=1.0, jitter=0.5).delay(0) for _ in range(50)]
    assert all(1.0 <= d <= 1.5 for d in jittered) and len(set(jittered)) > 1


def test_transient_failures_are_retried_with_the_waits_reported():
    seen: list[tuple[str, int, float]] = []
    f = Flaky(2)
    out = asyncio.run(retry(f, attempts=3, transient=(ConnectionError,),
                            backoff=Backoff(first_s=0.01, jitter=0.0),
                            on_retry=lambda e, n, w: seen.append((str(e), n, w))))
    assert out == 3 and seen == [("failure 1", 1, 0.01), ("failure 2", 2, 0.02)]


def test_the_last_failure_propagates_once_the_attempts_are_spent():
    f = Flaky(9)
    with pytest.raises(ConnectionError, match="failure 3"):
        asyncio.run(retry(f, attempts=3, transient=(ConnectionError,), backoff=Backoff(0.0)))
    assert f.calls == 3


def test_other_errors_are_not_retried():
    f = Flaky(1, exc=KeyError)
    with pytest.raises(KeyError):
        asyncio.run(retry(f, attempts=5, transient=(ConnectionError,), backoff=Backoff(0.0)))
    assert f.calls == 1


def test_a_wait_named_by_the_failure_wins_over_the_backoff():
    t0 = time.perf_counter()
    out = asyncio.run(retry(Flaky(1), attempts=2, transient=(ConnectionError,),
                            backoff=Backoff(first_s=30.0), wait_s=lambda e: 0.0))
    assert out == 2 and time.perf_counter() - t0 < 1.0


def test_poll_waits_until_up_and_gives_up_after_its_budget():
    assert asyncio.run(poll(Flaky(3), transient=(ConnectionError,), timeout_s=5.0,
                            backoff=Backoff(first_s=0.01, jitter=0.0))) == 4
    f = Flaky(10**6)
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError):
        asyncio.run(poll(f, transient=(ConnectionError,), timeout_s=0.1,
                         backoff=Backoff(first_s=0.02, max_s=0.02, jitter=0.0)))
    assert 0.1 <= time.perf_counter() - t0 < 1.0 and 5 <= f.calls <= 10


def test_failures_that_do_not_count_leave_the_attempts_for_those_that_do():
    """`counts` False (an evaluator's node left): retried without using up an attempt."""
    free = {"failure 1", "failure 2", "failure 3"}
    out = asyncio.run(retry(Flaky(4), attempts=2, transient=(ConnectionError,),
                            backoff=Backoff(0.0), counts=lambda e: str(e) not in free))
    assert out == 5
    f = Flaky(9)
    with pytest.raises(ConnectionError, match="failure 5"):
        asyncio.run(retry(f, attempts=2, transient=(ConnectionError,), backoff=Backoff(0.0),
                          counts=lambda e: str(e) not in free))
    assert f.calls == 5
