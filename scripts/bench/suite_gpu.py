"""Evaluate every task's own solution on the local GPU through the real evaluator; write JSON.

    python scripts/bench/suite_gpu.py [--out scripts/bench/results/suite_h200.json] [--include ...]

This is the oracle run that validates the suite and the harness on a new GPU: every solution must
come out exec_ok, and the file records speedup over eager and the SOL fraction per task and case.
No Ray needed: the evaluator is the same one the evaluator actors hold.
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator
from kbx_ray.extract import candidate_id
from kbx_ray.hardware import detect_local, peak_table
from kbx_ray.suite import load_suite
from kbx_ray.types import Candidate

log = logging.getLogger("suite_gpu")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--include", nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=1.0, help="timing budget per case and side")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pool = detect_local()
    cfg = EvalConfig(peak_gbps=pool.peak_gbps,
                     peak_tflops=peak_table(pool))
    cfg.timing.budget_s = args.budget_s
    ev = Evaluator(cfg)
    out = Path(args.out or f"scripts/bench/results/suite_{pool.name}.json")
    rows, t0 = [], time.perf_counter()
    for task in load_suite(include=args.include):
        code = Path(task.solution_path).read_text()
        res = ev.evaluate(task, Candidate(candidate_id(task.task_id, code), task.task_id, code, task.name))
        log.info("%-32s exec_ok=%s speedup=%s sol=%s %s %.1fs %s", task.task_id, res.exec_ok,
                 f"{res.speedup:.2f}" if res.speedup else "-",
                 f"{res.sol_fraction:.1%}" if res.sol_fraction else "-", res.error_kind,
                 res.eval_wall_s, res.error_msg[:300].replace("\n", " | "))
        rows.append({"task_id": task.task_id, "category": task.category, "exec_ok": res.exec_ok,
                     "error_kind": res.error_kind, "error_msg": res.error_msg,
                     "speedup": res.speedup, "sol_fraction": res.sol_fraction,
                     "eval_wall_s": round(res.eval_wall_s, 2), "stage_s": res.stage_s, "flags": res.flags,
                     "cases": [asdict(c) for c in res.cases]})
        write(out, ev.sandbox.info, pool, cfg, rows, t0)  # after every task: a timeout keeps them
    ev.close()
    doc = write(out, ev.sandbox.info, pool, cfg, rows, t0)
    log.info("%d/%d solutions correct on %s; %d faster than eager; wrote %s", doc["n_exec_ok"],
             len(rows), doc["gpu"], doc["n_faster_than_eager"], out)
    return 0 if doc["n_exec_ok"] == len(rows) else 1


def write(out: Path, info: dict, pool: object, cfg: EvalConfig, rows: list, t0: float) -> dict:
    doc = {
        "gpu": info.get("gpu_name", ""), "pool": pool.name, "torch": info.get("torch"),
        "triton": info.get("triton"), "cuda": info.get("driver"), "python": platform.python_version(),
        "timing": asdict(cfg.timing), "wall_s": round(time.perf_counter() - t0, 1),
        "n_tasks": len(rows), "n_exec_ok": sum(r["exec_ok"] for r in rows),
        "n_faster_than_eager": sum(bool(r["speedup"] and r["speedup"] > 1) for r in rows),
        "tasks": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    sys.exit(main())
