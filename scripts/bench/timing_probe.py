"""Where our timing loop and do_bench part ways, and whether a kernel's time depends on placement.

    python scripts/bench/timing_probe.py [--out scripts/bench/results/timing_probe_h200.json]

Two questions from bench_eval's figures (issue 9), answered on the GPU in one process:
1. Placement: the solutions' cases that showed a 2x outlier in one of five cold evaluations
   (`reduce/sum` transposed, `layer_norm` sliced) timed with our loop on `--placements` fresh input
   allocations, each shifted by a spacer of a different size. One bimodal list = the kernel's speed
   depends on where its input lands, not on the timing loop.
2. Loop variants on every timed case of bench_eval's tasks: our loop as configured (a warmup that
   flushes L2 like the measuring loop), the earlier unflushed warmup, a 100 ms flushed warmup and a
   200 ms measuring window, each against do_bench and CUDA-graph replay, interleaved. (The committed
   results' first probe predates the flushed warmup: there "ours" is the unflushed loop.)
Diagnostic only: it judges nothing and changes no setting.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PLACEMENT = [("reduce/sum", "fp32_transposed_4096x8191"),
             ("normalization/layer_norm", "fp32_sliced_32768x1000"),
             ("math/exp", "fp32_16M")]  # a control with no outlier so far
AGREEMENT_TASKS = ["activation/relu", "math/exp", "reduce/sum", "normalization/layer_norm",
                   "fusion/add_gelu", "matrix_multiply/matmul", "loss/cross_entropy",
                   "index/index_select"]  # bench_eval's tasks


def _case(task_id: str, case_name: str | None):  # noqa: ANN202
    """The task, its module, its solution's entry point and the named case (None: no case)."""
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.task_import import load_module

    task = get_task(task_id)
    mod, sol = load_module(task.path), load_module(task.solution_path, prefix="sol")
    case = next((c for c in task.cases if c["name"] == case_name), None)
    return task, mod, getattr(sol, task.name), case


def placement(placements: int) -> dict:
    import torch

    from kbx_ray.evaluate.common.timing import TimingConfig, bench

    out = {}
    for task_id, name in PLACEMENT:
        task, mod, fn, case = _case(task_id, name)
        meds = []
        for i in range(placements):
            spacer = torch.empty((i * 7 + 1) << 20, dtype=torch.uint8, device="cuda")
            args, kwargs = mod.make_inputs(case, i, "cuda")
            meds.append(round(bench(lambda: fn(*args, **kwargs), TimingConfig()).median_ms, 5))
            del args, kwargs, spacer
            torch.cuda.empty_cache()
        out[f"{task_id}:{name}"] = {"medians_ms": meds,
                                    "max_over_min": round(max(meds) / min(meds), 3)}
        print(task_id, name, out[f"{task_id}:{name}"], flush=True)
    return out


def agreement(rounds: int, tasks: list[str]) -> dict:
    """Every timed (non-small) case of the tasks' solutions: loop variants against do_bench and
    graph replay, interleaved in this process."""
    import torch
    import triton.testing

    from graph_timing import graph_median_ms
    from kbx_ray.evaluate.common.timing import TimingConfig, bench
    base = TimingConfig()
    variants = {"ours": base,
                "unflushed_warmup": replace(base, warmup_flush=False),
                "flush_warmup_100ms": replace(base, warmup_flush=True, warmup_ms=100.0),
                "min_200ms": replace(base, min_reps=0, target_rel_ci=0.0, budget_s=0.2,
                                     max_reps=100000)}
    out = {}
    for task_id in tasks:
        task, mod, fn, _ = _case(task_id, None)
        for case in [c for c in task.cases if not c["small"]]:
            args, kwargs = mod.make_inputs(case, 0, "cuda")
            call = lambda: fn(*args, **kwargs)  # noqa: E731
            got: dict[str, list[float]] = {k: [] for k in [*variants, "do_bench", "graph"]}
            reps: dict[str, list[int]] = {k: [] for k in variants}
            for _ in range(rounds):
                for k, cfg in variants.items():
                    t = bench(call, cfg)
                    got[k].append(t.median_ms)
                    reps[k].append(t.reps)
                got["do_bench"].append(triton.testing.do_bench(call, warmup=25, rep=200,
                                                               return_mode="median"))
                try:
                    got["graph"].append(graph_median_ms(call))
                except RuntimeError:
                    got.pop("graph", None)
            med = {k: statistics.median(v) for k, v in got.items() if v}
            key = f"{task_id}:{case['name']}"
            out[key] = {"median_ms": {k: round(v, 5) for k, v in med.items()},
                        "vs_do_bench": {k: round(med[k] / med["do_bench"], 3)
                                        for k in med if k != "do_bench"},
                        "reps": reps}
            print(key, out[key]["vs_do_bench"], flush=True)
            del args, kwargs
            torch.cuda.synchronize()
    return out


def summary(rows: dict) -> dict:
    """Per variant: the largest and the median |ratio - 1| against do_bench, over every case."""
    keys = {k for r in rows.values() for k in r["vs_do_bench"]}
    out = {}
    for k in sorted(keys):
        devs = [abs(r["vs_do_bench"][k] - 1) for r in rows.values() if k in r["vs_do_bench"]]
        out[k] = {"max_abs_dev": round(max(devs), 4),
                  "median_abs_dev": round(statistics.median(devs), 4), "cases": len(devs)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placements", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tasks", nargs="*", default=AGREEMENT_TASKS)
    ap.add_argument("--skip-placement", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/timing_probe_h200.json"))
    args = ap.parse_args()
    import torch

    doc = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not args.skip_placement:
        doc["placement"] = placement(args.placements)
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    doc["loop_variants"] = agreement(args.rounds, args.tasks)
    doc["loop_variant_summary"] = summary(doc["loop_variants"])
    print(json.dumps(doc["loop_variant_summary"]), flush=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
