"""The CUDA-graph reference timing the benchmarks compare `bench` against (`timing_probe.py`,
`dobench_gap.py`, `bench_eval.py`, tests/gpu): never used to judge a candidate, since a kernel that
syncs with the host cannot be captured. Import it as `scripts.bench.graph_timing` from the
repository root, or as `graph_timing` from a script in this folder."""
from __future__ import annotations

from typing import Any, Callable

from kbx_ray.evaluate.common.timing import (TimingConfig, _event, _flush_buffer, _gate_us, _queue,
                                            _warmup)


def graph_median_ms(fn: Callable[[], Any], replays: int = 50, flush_mb: int = 256,
                    queued: bool = True, warmup_ms: float = 25.0) -> float:
    """Median time of `fn` captured once in a CUDA graph and replayed, L2 flushed before each replay:
    the reference point with no launch overhead at all (for agreement checks, not for judging:
    a kernel that syncs with the host cannot be captured). After a warmup, `queued`: fed as `bench`
    feeds the GPU, every flush+replay pair queued back to back before one sync, and queued again
    behind a spin kernel if the GPU caught up with the host meanwhile; otherwise a sync after every
    replay (the GPU pauses between replays)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    flush = _flush_buffer(flush_mb)
    torch.cuda.synchronize()
    cfg = TimingConfig(warmup_ms=warmup_ms)
    _warmup(graph.replay, flush, cfg)
    if queued:
        pairs, host_us, clean, _ = _queue(graph.replay, flush, replays, 0.0, _event(record=True))
        torch.cuda.synchronize()
        if not clean:  # the GPU caught up with the host: once more, behind a spin
            pairs, *_ = _queue(graph.replay, flush, replays, _gate_us(host_us, cfg), None)
            torch.cuda.synchronize()
    else:
        pairs = [(_event(), _event()) for _ in range(replays)]
        for start, end in pairs:
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in pairs)
    return times[len(times) // 2]
