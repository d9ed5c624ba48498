"""Where do_bench, CUDA-graph replay and our loop part on 20-600 us kernels, and why (issue 9).

    python scripts/bench/dobench_gap.py [--out scripts/bench/results/dobench_gap_h200.json]

Round 1 (session 6, 391eb43) kept every rep of a do_bench clone: no drift inside its 200 ms, and
the SM clock (nvidia-smi) flat at 1980 MHz on the memory-bound kernels; yet every loop that keeps
the stream full (do_bench, its clone, a 20 ms clone, our loop in one 2700-rep batch) read 3-5% over
our 10-rep batches and over graph replay with a sync per replay. And one case (reduce/sum
transposed, two launches and ~100 us of Python per call against ~115 us of GPU work per rep) read
2x in 2 of 5 evaluations while other evaluators compiled on the CPU: when the host enqueues more
slowly than the GPU runs, the GPU waits inside the timed window.
Round 2 (45a5d4e): gating each batch behind a spin kernel cured the second (1.50x -> 1.015x under 14
CPU spinners) and showed the first is the GPU's, not a loop's: the longer the run of back-to-back
flush+call pairs since the GPU last paused, the slower a 20 us memory-bound kernel reads (batches of
10 after a pause +0.6%, of 50 +1.5%, 2000 +4.5% over graph replay with a sync per replay; do_bench
matches the last). Round 3 measures the loop that came of it, `feed="queued"`: batches queued
while the previous one runs, so the GPU never pauses, each counted only if it was queued before
the GPU reached it (gated batches when the host falls behind). Interleaved per case in one process:
- `do_bench`: triton.testing.do_bench(25, 200, median), as bench_eval compares against;
- `ours`: our loop as configured; `ours_gated`: gated batches from the start (45a5d4e's loop);
  `ours_plain`: a sync per batch, nothing checked (the loop until 391eb43);
- `graph`: CUDA-graph replay fed as our loop feeds the GPU (a warmup, replays back to back);
  `graph_sync`: a sync after every replay.
`--contend N` then repeats `ours_plain`, `ours` and `graph` on two cases while N processes spin on
the CPU (a sweep's compiles). Diagnostic only: it judges nothing and changes no setting.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CASES = [("activation/relu", "fp32_16M"),  # a control
         ("activation/relu", "fp16_16M"), ("activation/relu", "bf16_16M_outliers"),
         ("math/exp", "bf16_16M"), ("math/exp", "fp16_16M_outliers"),
         ("reduce/sum", "fp16_16384x4096_outliers"), ("reduce/sum", "fp32_transposed_4096x8191"),
         ("loss/cross_entropy", "vocab_16384x32000_outliers"),
         ("loss/cross_entropy", "sliced_8192x32000"),
         ("matrix_multiply/matmul", "square_4096"),
         ("matrix_multiply/matmul", "outliers_2048x8192x1024"),
         ("normalization/layer_norm", "fp32_8192x4096")]
CONTENDED = [("reduce/sum", "fp32_transposed_4096x8191"), ("activation/relu", "fp16_16M")]


def _call(task_id: str, case_name: str):  # noqa: ANN202
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.task_import import load_module

    task = get_task(task_id)
    mod, sol = load_module(task.path), load_module(task.solution_path, prefix="sol")
    case = next(c for c in task.cases if c["name"] == case_name)
    args, kwargs = mod.make_inputs(case, 0, "cuda")
    fn = getattr(sol, task.name)
    return lambda: fn(*args, **kwargs)


def variants(names: list[str]) -> dict:
    import triton.testing

    from graph_timing import graph_median_ms
    from kbx_ray.evaluate.common.timing import TimingConfig, bench

    base = TimingConfig()
    every = {
        "do_bench": lambda c: triton.testing.do_bench(c, warmup=25, rep=200, return_mode="median"),
        "ours": lambda c: bench(c, base).median_ms,
        "ours_gated": lambda c: bench(c, replace(base, feed="gated")).median_ms,
        "ours_plain": lambda c: bench(c, replace(base, feed="plain")).median_ms,
        "graph": lambda c: graph_median_ms(c),
        "graph_sync": lambda c: graph_median_ms(c, queued=False),
    }
    return {n: every[n] for n in names}


def probe_case(task_id: str, case_name: str, rounds: int, names: list[str]) -> dict:
    import torch

    call = _call(task_id, case_name)
    got: dict[str, list[float]] = {}
    marks: list[tuple[str, float, float]] = []
    for _ in range(rounds):
        for name, run in variants(names).items():
            t0 = time.time()
            got.setdefault(name, []).append(run(call))
            marks.append((name, round(t0, 3), round(time.time(), 3)))
    from kbx_ray.evaluate.common.timing import TimingConfig, bench

    feed = bench(call, TimingConfig()).feed  # how our loop fed this case (queued or gated)
    torch.cuda.synchronize()
    med = {k: statistics.median(v) for k, v in got.items()}
    ref = med["graph"]
    return {"ours_feed": feed, "median_ms": {k: round(v, 5) for k, v in med.items()},
            "vs_graph": {k: round(v / ref, 3) for k, v in med.items() if k != "graph"},
            "vs_do_bench": {k: round(v / med["do_bench"], 3) for k, v in med.items()
                            if "do_bench" in med and k != "do_bench"},
            "values_ms": {k: [round(x, 5) for x in v] for k, v in got.items()}, "marks": marks}


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="*", default=None, help="task:case keys (default: all)")
    ap.add_argument("--contend", type=int, default=14, help="CPU spinners for the contended pass")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/dobench_gap_h200.json"))
    args = ap.parse_args()
    import torch

    doc: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                 "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cases": {},
                 "contended": {}}
    names = ["do_bench", "ours", "ours_gated", "ours_plain", "graph", "graph_sync"]
    for task_id, name in CASES:
        if args.cases and f"{task_id}:{name}" not in args.cases:
            continue
        row = probe_case(task_id, name, args.rounds, names)
        doc["cases"][f"{task_id}:{name}"] = row
        print(f"{task_id}:{name}", "vs graph", row["vs_graph"], flush=True)
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    if args.contend:
        ctx = mp.get_context("spawn")
        spinners = [ctx.Process(target=_spin, args=(time.time() + 120,), daemon=True)
                    for _ in range(args.contend)]
        for p in spinners:
            p.start()
        time.sleep(1.0)
        try:
            for task_id, name in CONTENDED:
                row = probe_case(task_id, name, args.rounds, ["ours_plain", "ours", "graph"])
                doc["contended"][f"{task_id}:{name}"] = row
                print(f"contended {task_id}:{name}", "vs graph", row["vs_graph"], flush=True)
                Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        finally:
            for p in spinners:
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
