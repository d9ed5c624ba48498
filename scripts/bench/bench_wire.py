"""A GPU output to the wire's host bytes: the plain `.to("cpu")` copy against the page-locked one
(`protocol._pinned_copy`), side by side in one run, on outputs of 4-256 MB.

    python scripts/bench/bench_wire.py [--out results/bench_wire_<gpu>.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from kbx_ray.evaluate import protocol


def _ms(fn, t: torch.Tensor, reps: int) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        meta, raw = fn(t)
        times.append((time.perf_counter() - t0) * 1e3)
        del raw
    return statistics.median(times)


def _plain(t: torch.Tensor) -> tuple[dict, object]:
    """`tensor_to_wire` without its page-locked path."""
    keep, protocol._pinned_copy = protocol._pinned_copy, lambda t: None
    try:
        return protocol.tensor_to_wire(t)
    finally:
        protocol._pinned_copy = keep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for mb in (4, 32, 64, 256):
        t = torch.randn(mb << 18, device="cuda")
        plain = _ms(_plain, t, args.reps)
        pinned = _ms(protocol.tensor_to_wire, t, args.reps)
        rows.append({"mb": mb, "plain_ms": round(plain, 2), "pinned_ms": round(pinned, 2),
                     "ratio": round(plain / pinned, 2)})
        print(json.dumps(rows[-1]), flush=True)
    protocol.empty_host_cache()
    out = Path(args.out or f"scripts/bench/results/bench_wire_{gpu.split()[1].lower()}.json")
    out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "rows": rows}, indent=1)
                   + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
