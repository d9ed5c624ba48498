"""GPU memory admission's reservation per task: by cost bytes (before) and by footprint (now).

    python scripts/bench/footprint_table.py [--include ids...] [--total-gb 79.1]
        [--out scripts/bench/results/footprint_cpu.json]

CPU only (no GPU needed, nothing allocated): for every task, every case (a GPU runs them all) is
sized both ways, `cost(case)["bytes"]` (the traffic, which admission.Admission.estimate used) and
cases/footprint.py (distinct input storages + outputs, under fake tensors), and the reservation
`Admission.estimate` makes is computed with the default evaluation settings (gpu_mem_factor +
timing and fresh sets, flush buffer, margin, floor): before, from the largest cost bytes; now, by
`Admission.estimate` itself (the largest of each case's footprint and cost bytes). Per task: the largest case
each way, old and new estimate in GB (1e9 bytes), how the footprint was found (fake, declared,
fallback) and whether the new one exceeds the per-GPU budget (`--total-gb`, an H100's 79.1 GiB by
default, minus `gpu_mem_reserve_gb`): such an evaluation is capped at the budget by the ledger
and runs alone on the GPU.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", nargs="*", default=None)
    ap.add_argument("--total-gb", type=float, default=79.1, help="device total, GiB (H100 80GB)")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/footprint_cpu.json"))
    args = ap.parse_args()

    from kbx_ray.cases import footprint
    from kbx_ray.evaluate.parent.admission import Admission
    from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger, budget_bytes, estimate_bytes
    from kbx_ray.evaluate.settings import EvalConfig
    from kbx_ray.suites.builtin import load_suite
    from kbx_ray.suites.task_import import load_module

    cfg = EvalConfig()
    factor = cfg.gpu_mem_factor + cfg.timed_sets
    flush = cfg.timing.flush_mb << 20
    budget = budget_bytes(int(args.total_gb * (1 << 30)), int(cfg.gpu_mem_reserve_gb * (1 << 30)))

    def est(n: int) -> float:
        return round(estimate_bytes(n, flush, factor) / 1e9, 3)

    admission = Admission(cfg, MemoryLedger("footprint_table", budget, tempfile.mkdtemp()))
    rows, t0 = [], time.perf_counter()
    for task in load_suite(include=args.include):
        mod = load_module(task.path)
        costs = {c["name"]: int(mod.cost(c).get("bytes") or 0) for c in task.cases}
        sizes = {c["name"]: footprint.sized(mod, c) for c in task.cases}
        old_case = max(costs, key=costs.get)
        new_case = max(sizes, key=lambda k: sizes[k][0])
        new = admission.estimate(mod, list(task.cases))  # max(footprint, cost bytes) of each case
        rows.append({
            "task": task.task_id, "old_case": old_case, "old_bytes": costs[old_case],
            "new_case": new_case, "footprint_bytes": sizes[new_case][0], "how": sizes[new_case][1],
            "old_estimate_gb": est(costs[old_case]), "new_estimate_gb": round(new / 1e9, 3),
            "ratio": round(new / estimate_bytes(costs[old_case], flush, factor), 3),
            "over_budget": new > budget,
        })
    rows.sort(key=lambda r: -r["ratio"])
    out = {
        "machine": platform.node(), "python": platform.python_version(),
        "settings": {"factor": factor, "flush_mb": cfg.timing.flush_mb,
                     "budget_gb": round(budget / 1e9, 3), "total_gib": args.total_gb},
        "seconds": round(time.perf_counter() - t0, 1),
        "tasks": len(rows), "over_budget": [r["task"] for r in rows if r["over_budget"]],
        "larger": sum(r["ratio"] > 1.001 for r in rows), "smaller": sum(r["ratio"] < 0.999 for r in rows),
        "fallback": sorted({r["task"] for r in rows if r["how"] != "fake"}),
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{'task':44} {'old GB':>8} {'new GB':>8} {'x':>6}  how")
    for r in rows:
        print(f"{r['task']:44} {r['old_estimate_gb']:8.2f} {r['new_estimate_gb']:8.2f} "
              f"{r['ratio']:6.2f}  {r['how']}{'  OVER BUDGET' if r['over_budget'] else ''}")
    print(f"{out['tasks']} tasks in {out['seconds']} s; larger {out['larger']}, smaller "
          f"{out['smaller']}; budget {out['settings']['budget_gb']} GB; over: {out['over_budget']}")


if __name__ == "__main__":
    main()
