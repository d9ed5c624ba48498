"""The output comparison's cost on a GPU: the chunked loop alone against its one-pass common case
(parent/one_pass.py), on passing 16M-value outputs, alone and beside processes that keep the GPU
busy (evaluators share it: every read back waits behind their kernels).

    python scripts/bench/bench_compare.py [--busy 0 4] [--out results/bench_compare_<gpu>.json]

Prints, per dtype and load, the median ms of each and their ratio, measured side by side.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path

import torch


def _busy(stop: "mp.synchronize.Event") -> None:
    """A neighbour evaluator: a stream of mid-sized kernels with a read back now and then."""
    a = torch.randn(2048, 2048, device="cuda")
    while not stop.is_set():
        for _ in range(20):
            a = torch.tanh(a @ a * 1e-3)
        float(a[0, 0])


def _median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        assert fn().ok
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    from kbx_ray.evaluate.parent import correctness
    from kbx_ray.evaluate.parent.correctness import DEFAULT_TOLERANCE, _close

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, nargs="*", default=[0, 4])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for busy in args.busy:
        ctx = mp.get_context("spawn")
        stop = ctx.Event()
        procs = [ctx.Process(target=_busy, args=(stop,)) for _ in range(busy)]
        for p in procs:
            p.start()
        time.sleep(8 if busy else 0)  # their contexts up and busy
        for dt in (torch.float32, torch.bfloat16):
            r = torch.randn(4096, 4096, device="cuda").to(dt)
            o = r.clone()
            one = _median_ms(lambda: _close(o, r, DEFAULT_TOLERANCE), args.reps)
            keep = (correctness.one_pass.close_errors, correctness.one_pass.all_equal)
            correctness.one_pass.close_errors = lambda *a: None
            try:
                loop = _median_ms(lambda: _close(o, r, DEFAULT_TOLERANCE), args.reps)
            finally:
                correctness.one_pass.close_errors, correctness.one_pass.all_equal = keep
            rows.append({"dtype": str(dt).replace("torch.", ""), "busy_procs": busy,
                         "loop_ms": round(loop, 2), "one_pass_ms": round(one, 2),
                         "ratio": round(loop / one, 2)})
            print(json.dumps(rows[-1]), flush=True)
        stop.set()
        for p in procs:
            p.join(30)
    doc = {"gpu": gpu, "torch": torch.__version__, "values": 4096 * 4096, "rows": rows}
    out = Path(args.out or f"scripts/bench/results/bench_compare_{gpu.split()[1].lower()}.json")
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
