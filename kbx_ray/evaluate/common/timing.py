"""GPU timing shared by the candidate worker and the trusted reference timer.
More: kbx_ray/evaluate/common/README.md, `timing.py`.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from kbx_ray.evaluate.common.side_stream import side_stream_wall, suspect


FEEDS = ("queued", "gated", "plain")  # how bench feeds the GPU (its docstring)


@dataclass
class TimingConfig:
    warmup_ms: float = 25.0        # warmup time before measuring
    warmup_flush: bool = True      # flush L2 before each warmup call too (the measuring pattern)
    min_reps: int = 10
    max_reps: int = 2000
    budget_s: float = 1.0          # per case and side
    target_rel_ci: float = 0.01    # stop when the median's 95% CI half-width <= 1% of the median
    flush_mb: int = 256            # bigger than any current L2
    batch: int = 10                # events synchronised per batch
    feed: str = "queued"           # queued | gated | plain: how batches reach the GPU (see bench)
    gate_max_us: float = 20000.0   # the longest gate (a call that syncs inside outruns any gate)

    def __post_init__(self) -> None:
        if self.feed not in FEEDS:
            raise ValueError(f"timing feed {self.feed!r} is not one of {', '.join(FEEDS)}")
        if self.batch < 1 or self.max_reps < 1:
            raise ValueError(f"timing batch ({self.batch}) and max_reps ({self.max_reps}) must be "
                             ">= 1")


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    rel_ci: float
    wall_s: float                  # host wall time of the measuring loop
    event_sum_ms: float            # sum of the event times (must be below wall time)
    sync_wall_ms: float = 0.0      # per-call wall time with device-wide syncs
    sync_tail_ms: float = 0.0      # of it, the wait after the call returned (side-stream check)
    sync_tries: int = 0            # how many times it was measured (more while it looked suspect)
    feed: str = ""                 # how the counted batches reached the GPU (bench's docstring)
    times_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("times_ms")
        return d


def median_rel_ci(xs: list[float]) -> float:
    """Half-width of the 95% CI of the median, relative to the median (order statistics)."""
    n = len(xs)
    if n < 5:
        return math.inf
    s = sorted(xs)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    med = s[n // 2]
    return (s[hi] - s[lo]) / (2 * med) if med > 0 else math.inf


def _quantile(s: list[float], q: float) -> float:
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def bench(fn: Callable[[], Any], cfg: TimingConfig, device: str = "cuda",
          between: Callable[[], Any] | None = None) -> Timing:
    """Time `fn` on the current CUDA device. `fn` must be idempotent on its inputs. Without a GPU
    (`evaluation.cpu_timing`, for tests of the protocol) the host clock times each call instead.
    `between`, if given, runs after every call of `fn` (warmup, timed and synced calls alike),
    always outside the timed window: after the end event, before the next flush (rotation.py
    checks the timed calls with it).

    `feed="queued"` (the default) keeps the GPU busy without pauses, as a model's forward pass
    does and as `triton.testing.do_bench` does: each batch of flush+call pairs is queued while the
    previous one runs. A batch counts only if the GPU had not reached it when the host finished
    queuing it (the batch before was still running), so the GPU never waited for the host inside a
    timed window. When the host falls behind (Python-heavy calls, a busy CPU) the loop turns to
    gated batches: each held behind a spin kernel that outlasts the host's queuing (the spin must
    still be running once the batch is queued), a sync between batches; a gate that would pass its
    cap holds fewer calls. If even one call outruns the longest gate (a call that syncs with the
    host inside), the times are kept as measured and the result says `feed="host_bound"`.
    `feed="gated"` gates from the start; `"plain"` is the loop before gating (a sync per batch,
    nothing checked), kept for comparisons."""
    import torch

    after = between or _nothing
    if device != "cuda":
        return _bench_host(fn, cfg, after)
    flush = _flush_buffer(cfg.flush_mb)
    fn()
    after()
    torch.cuda.synchronize()
    host_us_per_call = _warmup(fn, flush, cfg, after)
    deadline = time.perf_counter() + cfg.budget_s
    t0 = time.perf_counter()
    times, mode = _timed_loop(fn, flush, cfg, after, host_us_per_call, deadline)
    wall = time.perf_counter() - t0
    t = _summary(times, wall, 0.0, mode)
    t.sync_wall_ms, t.sync_tail_ms, t.sync_tries = side_stream_wall(fn, min(20, len(times)),
                                                                     after, t.median_ms)
    return t


def _timed_loop(fn: Callable[[], Any], flush: Any, cfg: TimingConfig, after: Callable[[], Any],
                host_us_per_call: float, deadline: float) -> tuple[list[float], str]:
    """(event times in ms, the feed the loop ended in): batches queued, checked and gated as
    `bench` says, until `max_reps`, the confidence target or the deadline."""
    import torch

    mode, size, recalibrated = cfg.feed, cfg.batch, False
    gate_us = _gate_us(host_us_per_call * size, cfg) if mode == "gated" else 0.0
    times: list[float] = []
    pending = _queue(fn, flush, size, gate_us, _event(record=True), after)
    while True:
        pairs, host_us, clean, gated_by = pending
        nxt = None
        if mode == "queued" and len(times) + len(pairs) + size <= cfg.max_reps:
            nxt = _queue(fn, flush, size, 0.0, pairs[-1][1], after)  # behind the running batch
        pairs[-1][1].synchronize()
        if clean or mode in ("plain", "host_bound"):
            times.extend(s.elapsed_time(e) for s, e in pairs)
        elif mode == "queued":
            mode, gate_us = "gated", _gate_us(max(host_us, host_us_per_call * size), cfg)
        elif host_us < 0.5 * gated_by and not recalibrated:  # the spin ran short: a new clock
            recalibrated = True
            _CYCLES_PER_US.clear()
        elif gated_by < cfg.gate_max_us:
            gate_us = max(gate_us, _gate_us(max(host_us, 2 * gated_by), cfg))
        elif size > 1:  # the longest gate is too short for the batch: fewer calls behind it
            size = max(1, size // 2)
        else:  # one call outruns the longest gate: it waits on the GPU inside
            mode = "host_bound"
            times.extend(s.elapsed_time(e) for s, e in pairs)
        if (len(times) >= cfg.max_reps or _enough(times, cfg, deadline)
                or (mode == "queued" and nxt is None)):  # no room left for a checked batch
            torch.cuda.synchronize()
            if nxt is not None and nxt[2]:  # the batch in flight ran anyway
                times.extend(s.elapsed_time(e) for s, e in nxt[0])
            break
        pending = nxt if nxt is not None else _queue(fn, flush, size,
                                                     gate_us if mode == "gated" else 0.0, None,
                                                     after)
    return times, mode


def _nothing() -> None:
    pass


def _queue(fn: Callable[[], Any], flush: Any, n: int, gate_us: float,
           ahead: Any, after: Callable[[], Any] = _nothing) -> tuple[list, float, bool, float]:
    """n flush+call pairs, behind a spin of `gate_us` if given (else behind the event `ahead`);
    whether they were all queued before the GPU reached them; the host's queuing time; the gate."""
    pairs = [(_event(), _event()) for _ in range(n)]
    if gate_us:
        spin_us(gate_us)
        ahead = _event(record=True)
    t = time.perf_counter()
    for start, end in pairs:
        flush.zero_()
        start.record()
        fn()
        end.record()
        after()
    host_us = (time.perf_counter() - t) * 1e6
    return pairs, host_us, ahead is not None and not ahead.query(), gate_us


def _warmup(fn: Callable[[], Any], flush: Any, cfg: TimingConfig,
            after: Callable[[], Any] = _nothing) -> float:
    """The measuring pattern for `warmup_ms`, never more than two batches ahead of the GPU (a long
    kernel's backlog would run into the timing budget), the GPU kept busy throughout. Returns the
    host's time per call, its waits for the GPU left out."""
    marks: list[Any] = []
    n, waited, t0 = 0, 0.0, time.perf_counter()
    while time.perf_counter() < t0 + cfg.warmup_ms / 1e3:
        if cfg.warmup_flush:
            flush.zero_()
        fn()
        after()
        n += 1
        if n % cfg.batch == 0:
            marks.append(_event(record=True))
            if len(marks) > 2:
                t = time.perf_counter()
                marks.pop(0).synchronize()
                waited += time.perf_counter() - t
    return (time.perf_counter() - t0 - waited) * 1e6 / max(1, n)


def _flush_buffer(mb: int) -> Any:
    """A buffer bigger than L2: writing it (`zero_()`) evicts the kernel's inputs and outputs."""
    import torch

    return torch.empty(mb << 20, dtype=torch.uint8, device="cuda")


def _event(record: bool = False) -> Any:
    import torch

    e = torch.cuda.Event(enable_timing=True)
    if record:
        e.record()
    return e


def _gate_us(host_us: float, cfg: TimingConfig) -> float:
    """How long the GPU waits before a batch: longer than the host took to enqueue the last one."""
    return min(1.5 * host_us + 20.0, cfg.gate_max_us)


_CYCLES_PER_US: dict[int, float] = {}


def spin_us(us: float) -> None:
    """Queue a kernel that spins for about `us` microseconds on the current stream. The cycle rate
    is measured once per device (the SM clock varies by GPU; a throttled clock only lengthens it)."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _CYCLES_PER_US:
        torch.cuda._sleep(1000)
        start, end = _event(record=True), _event()
        torch.cuda._sleep(2_000_000)
        end.record()
        end.synchronize()
        _CYCLES_PER_US[dev] = 2_000_000 / max(start.elapsed_time(end) * 1e3, 1.0)
    torch.cuda._sleep(max(1, int(us * _CYCLES_PER_US[dev])))


def _enough(times: list[float], cfg: TimingConfig, deadline: float) -> bool:
    """The adaptive stop, the same for every loop: enough reps and a tight median, or no budget."""
    return len(times) >= max(1, cfg.min_reps) and (
        median_rel_ci(times) <= cfg.target_rel_ci or time.perf_counter() > deadline)


def _summary(times: list[float], wall_s: float, sync_wall_ms: float, feed: str = "") -> Timing:
    s = sorted(times)
    return Timing(
        median_ms=s[len(s) // 2], p20_ms=_quantile(s, 0.2), p80_ms=_quantile(s, 0.8),
        reps=len(times), rel_ci=median_rel_ci(times), wall_s=wall_s, event_sum_ms=sum(times),
        sync_wall_ms=sync_wall_ms, feed=feed, times_ms=times,
    )


def _bench_host(fn: Callable[[], Any], cfg: TimingConfig,
                after: Callable[[], Any] = _nothing) -> Timing:
    """The same loop on the host clock (the Triton interpreter: figures that mean nothing about a
    GPU, only the protocol around them is exercised)."""
    fn()
    after()
    times: list[float] = []
    deadline = time.perf_counter() + cfg.budget_s
    t0 = time.perf_counter()
    while len(times) < cfg.max_reps:
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
        after()
        if _enough(times, cfg, deadline):
            break
    wall = time.perf_counter() - t0
    return _summary(times, wall, sorted(times)[len(times) // 2], "host")  # the host clock syncs


def side_stream_suspect(t: Timing, slack_ms: float = 0.1, ratio: float = 3.0) -> bool:
    """True when the wait after a call returned cannot be explained by its events plus a sync."""
    return suspect(t.sync_tail_ms, t.median_ms, slack_ms, ratio)
