"""Engine overhead: cells per second through the real engine with instant generation and evaluation.

    python scripts/bench/bench_engine.py [--cells 10000 100000] [--out scripts/bench/results/bench_engine.json]

Everything is the real sweep path (config, grid, method coroutine, generation log, Ray evaluator
actors, rows, Parquet, console) except the work itself: the `reference` backend answers at once and
`engine.mode=noop` actors return an instant verdict. It prints cells/s per grid size and the
driver's resident memory growth, so that "flat memory from 10k to 100k cells" is a measured claim.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIFTEEN = ("activation/relu,math/exp,reduce/sum,normalization/layer_norm,matrix_multiply/matmul,"
           "linear_algebra/matvec,fusion/add_gelu,index/index_select,loss/cross_entropy,"
           "quantization/matmul_w8a8,optimizer/adam,spatial_ops/interpolate,convolution/conv2d,"
           "random/rand,pooling/avg_pool1d")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run(n_cells: int, out_dir: str, evaluators: int, concurrency: int) -> dict:
    from kbx_ray import engine
    from kbx_ray.config import load_config

    samples = max(1, n_cells // 15)
    cfg = load_config([f"output_dir={out_dir}", f"suite.include=[{FIFTEEN}]", "wandb.mode=disabled",
                       "engine.mode=noop", f"engine.evaluators={evaluators}",
                       f"engine.max_concurrency={concurrency}", "engine.flush_every=2000",
                       "engine.flush_s=30", f"sweep.samples={samples}", f"sweep_id=bench{n_cells}"])
    before = rss_mb()
    t0 = time.perf_counter()
    p = engine.run_sweep(cfg)
    wall = time.perf_counter() - t0
    return {"cells": p.n_cells, "wall_s": round(wall, 2), "cells_per_s": round(p.n_cells / wall, 1),
            "rss_before_mb": round(before, 1), "rss_after_mb": round(rss_mb(), 1)}


def main() -> int:
    import logging

    import ray

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--evaluators", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_engine.json"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        run(300, tmp, args.evaluators, args.concurrency)  # warm: actors, imports, first parts
        for n in args.cells:
            runs.append(run(n, tmp, args.evaluators, args.concurrency))
            print(json.dumps(runs[-1]), flush=True)
    ray.shutdown()
    growth = [r["rss_after_mb"] - r["rss_before_mb"] for r in runs]
    doc = {
        "hardware": f"{cpu_name()}, {os.cpu_count()} cores (CPU only)",
        "python": platform.python_version(), "evaluators": args.evaluators,
        "max_concurrency": args.concurrency, "runs": runs,
        "cells_per_s": min(r["cells_per_s"] for r in runs),
        "rss_growth_mb": dict(zip([str(r["cells"]) for r in runs], growth)),
        "two_gpu_scaling": None,  # measured by scripts/bench/bench_two_gpu.py on an H200 x2 host
    }
    if Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        doc["two_gpu_scaling"] = old.get("two_gpu_scaling")
        doc["two_gpu_detail"] = old.get("two_gpu_detail")
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
