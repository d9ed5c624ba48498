"""Where do_bench, CUDA-graph replay and our loop part on 20-600 us kernels, and why (issue 9).

    python scripts/bench/dobench_gap.py [--out scripts/bench/results/dobench_gap_h200.json]

Round 1 (session 6, 391eb43) kept every rep of a do_bench clone: no drift inside its 200 ms, and
the SM clock (nvidia-smi) flat at 1980 MHz on the memory-bound kernels; yet every loop that keeps
the stream full (do_bench, its clone, a 20 ms clone, our loop in one 2700-rep batch) read 3-5% over
our 10-rep batches and over graph replay with a sync per replay. And one case (reduce/sum
transposed, two launches and ~100 us of Python per call against ~115 us of GPU work per rep) read
2x in 2 of 5 evaluations while other evaluators compiled on the CPU: when the host enqueues more
slowly than the GPU runs, the GPU waits inside the timed window. Round 2 probes both, interleaved
per case in one process:
- `do_bench`: triton.testing.do_bench(25, 200, median), as bench_eval compares against;
- `ours_nogate`: our loop with each batch enqueued while the GPU runs it (the loop until 391eb43);
- `ours`: our loop as configured: each batch of 10 queued behind a spin kernel sized from the host's
  enqueue time, so the GPU runs the batch back to back; `ours_b50`: batches of 50;
- `ours_sustained`: our loop held to do_bench's rep count in one unsynchronised batch;
- `graph`: CUDA-graph replay, a sync after each replay; `graph_b10`: replays queued 10 at a time
  behind a spin kernel, as our loop feeds the GPU.
`--contend N` then repeats `ours_nogate`, `ours` and `graph_b10` on two cases while N processes
spin on the CPU (a sweep's compiles). Diagnostic only: it judges nothing and changes no setting.
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
    from kbx_ray.suite import get_task, load_module

    task = get_task(task_id)
    mod, sol = load_module(task.path), load_module(task.solution_path, prefix="sol")
    case = next(c for c in task.cases if c["name"] == case_name)
    args, kwargs = mod.make_inputs(case, 0, "cuda")
    fn = getattr(sol, task.name)
    return lambda: fn(*args, **kwargs)


def variants(names: list[str]) -> dict:
    import triton.testing

    from kbx_ray.evaluate.timing import TimingConfig, bench, graph_median_ms

    base = TimingConfig()
    every = {
        "do_bench": lambda c: triton.testing.do_bench(c, warmup=25, rep=200, return_mode="median"),
        "ours_nogate": lambda c: bench(c, replace(base, gate=False)).median_ms,
        "ours": lambda c: bench(c, base).median_ms,
        "ours_b50": lambda c: bench(c, replace(base, batch=50)).median_ms,
        "ours_sustained": lambda c: bench(c, replace(base, gate=False, batch=2000, min_reps=2000,
                                                     max_reps=2000, target_rel_ci=0.0,
                                                     budget_s=60.0)).median_ms,
        "graph": lambda c: graph_median_ms(c),
        "graph_b10": lambda c: graph_median_ms(c, batch=10),
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
    torch.cuda.synchronize()
    med = {k: statistics.median(v) for k, v in got.items()}
    ref = med.get("graph") or med["graph_b10"]
    return {"median_ms": {k: round(v, 5) for k, v in med.items()},
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
    ap.add_argument("--contend", type=int, default=14, help="CPU spinners for the contended pass")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/dobench_gap_h200.json"))
    args = ap.parse_args()
    import torch

    doc: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                 "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cases": {},
                 "contended": {}}
    names = ["do_bench", "ours_nogate", "ours", "ours_b50", "ours_sustained", "graph", "graph_b10"]
    for task_id, name in CASES:
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
                row = probe_case(task_id, name, args.rounds, ["ours_nogate", "ours", "graph_b10"])
                doc["contended"][f"{task_id}:{name}"] = row
                print(f"contended {task_id}:{name}", "vs graph_b10", row["vs_graph"], flush=True)
                Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        finally:
            for p in spinners:
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
