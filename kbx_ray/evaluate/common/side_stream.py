"""A timed call's wall clock under device-wide syncs -> whether it hid work from its events.

Work hidden on a side stream escapes the default-stream events but not a device-wide sync. `bench`
(timing.py) measures this after its timed loop; the parent judges it
(`timing.side_stream_suspect`).
Standard library and torch only.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable


def _nothing() -> None:
    pass


def _sync_wall_ms(fn: Callable[[], Any], n: int,
                  after: Callable[[], Any] = _nothing) -> tuple[float, float]:
    """Median host time of one call bracketed by device-wide syncs, and of it the median wait
    after the call returned.

    Work hidden on a side stream escapes the default-stream events but not a device-wide sync, so a
    call whose wait after returning far exceeds its event time did work where the events missed
    it. The call's own host time (Python, launches, allocations) is left out of that wait: a
    multi-launch wrapper on a loaded host spends 0.2 ms there on a 20 us kernel, honestly.
    """
    import torch

    walls, tails = [], []
    for _ in range(max(3, n)):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        returned = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
        walls.append((done - t) * 1e3)
        tails.append((done - returned) * 1e3)
        after()
    walls.sort()
    tails.sort()
    return walls[len(walls) // 2], tails[len(tails) // 2]


def suspect(tail_ms: float, median_ms: float, slack_ms: float = 0.1, ratio: float = 3.0) -> bool:
    return tail_ms > ratio * median_ms + slack_ms


def side_stream_wall(fn: Callable[[], Any], n: int, after: Callable[[], Any], median_ms: float,
                     tries: int = 3, measure: Callable[..., tuple[float, float]] | None = None
                     ) -> tuple[float, float, int]:
    """(synced wall, wait after return, tries): measured again (up to `tries` times, further apart
    each time) while the wait looks like side-stream work, keeping the least wait. Another
    process's CUDA context starting up, or its kernels, stall a device sync for a while: with eight
    evaluators on one H200, honest 4-40 us kernels read 0.12-0.33 ms and were disqualified. Such
    stalls only ever add time; work hidden on a side stream costs its time in every try, so the
    least of the tries still shows it."""
    measure = measure or _sync_wall_ms
    best = (math.inf, math.inf)
    for k in range(1, tries + 1):
        got = measure(fn, n=n, after=after)
        best = got if got[1] < best[1] else best
        if not suspect(best[1], median_ms) or k == tries:
            return best[0], best[1], k
        time.sleep(0.05 * k)
    return best[0], best[1], tries
