"""Evaluate every task's own solution on the local GPU through the real evaluator; write JSON.

    python scripts/bench/suite_gpu.py [--out scripts/bench/results/suite_h200.json] [--include ...]
                                      [--jobs N]

This is the oracle run that validates the suite and the harness on a new GPU: every solution must
come out exec_ok, and the file records speedup over eager and the SOL fraction per task and case.
No Ray needed: the evaluator is the same one the evaluator actors hold. `--jobs N` runs N evaluators
on the GPU at once: they compile and check in parallel, and the GPU lock (evaluate/gpulock.py) makes
every timing run alone, so the figures match a serial run's.
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import platform
import queue
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator
from kbx_ray.extract import candidate_id
from kbx_ray.hardware import detect_local, peak_table
from kbx_ray.suite import get_task, load_suite
from kbx_ray.types import Candidate

log = logging.getLogger("suite_gpu")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--include", nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=1.0, help="timing budget per case and side")
    ap.add_argument("--jobs", type=int, default=1, help="evaluators sharing the GPU")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pool = detect_local()
    out = Path(args.out or f"scripts/bench/results/suite_{pool.name}.json")
    ids = [t.task_id for t in load_suite(include=args.include)]
    rows: dict[str, dict] = {}
    info: dict = {}
    t0 = time.perf_counter()
    info = _pass(ids, args, rows, info, out, pool, t0)
    oom = [r["task_id"] for r in rows.values()
           if r["error_kind"] == "infra_error" and "out of memory" in r["error_msg"]]
    if oom and args.jobs > 1:  # the jobs' memory together ran out, not the task's: retry alone
        log.info("retrying %d tasks that ran out of GPU memory beside other jobs, one at a time",
                 len(oom))
        info = _pass(oom, argparse.Namespace(**{**vars(args), "jobs": 1}), rows, info, out, pool, t0)
    doc = write(out, info, pool, args, list(rows.values()), t0)
    log.info("%d/%d solutions correct on %s; %d faster than eager; wrote %s", doc["n_exec_ok"],
             len(ids), doc["gpu"], doc["n_faster_than_eager"], out)
    return 0 if doc["n_exec_ok"] == len(ids) else 1


def _pass(ids: list[str], args: Any, rows: dict, info: dict, out: Path, pool: Any,
          t0: float) -> dict:
    """Evaluate `ids` with `args.jobs` evaluator processes; rows[task_id] is (re)set per task."""
    ctx = mp.get_context("spawn")
    todo, done = ctx.Queue(), ctx.Queue()
    for tid in ids:
        todo.put(tid)
    procs = [ctx.Process(target=_serve, args=(todo, done, args.budget_s), daemon=True)
             for _ in range(max(1, args.jobs))]
    for p in procs:
        todo.put(None)
        p.start()
    got = 0
    while got < len(ids):
        try:
            row, info = done.get(timeout=5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                log.error("every evaluator process exited with %d tasks left", len(ids) - got)
                break
            continue
        got += 1
        rows[row["task_id"]] = row
        log.info("%-32s exec_ok=%s speedup=%s sol=%s %s %.1fs %s", row["task_id"], row["exec_ok"],
                 f"{row['speedup']:.2f}" if row["speedup"] else "-",
                 f"{row['sol_fraction']:.1%}" if row["sol_fraction"] else "-", row["error_kind"],
                 row["eval_wall_s"], row["error_msg"][:300].replace("\n", " | "))
        write(out, info, pool, args, list(rows.values()), t0)  # after every task: a timeout keeps them
    for p in procs:
        p.join(30)
    return info


def _serve(todo: Any, done: Any, budget_s: float) -> None:
    """One evaluator process: take task ids until the sentinel, put back one row per task."""
    pool = detect_local()
    cfg = EvalConfig(peak_gbps=pool.peak_gbps, peak_tflops=peak_table(pool))
    cfg.timing.budget_s = budget_s
    cfg.ref_cache_mb = 1024  # one candidate per task: a big cache only crowds the other jobs
    ev = Evaluator(cfg)
    ev.inputs.max_bytes = 1 << 30
    try:
        while (tid := todo.get()) is not None:
            task = get_task(tid)
            code = Path(task.solution_path).read_text()
            res = ev.evaluate(task, Candidate(candidate_id(task.task_id, code), task.task_id, code,
                                              task.name))
            done.put(({"task_id": task.task_id, "category": task.category,
                       "exec_ok": res.exec_ok, "error_kind": res.error_kind,
                       "error_msg": res.error_msg, "speedup": res.speedup,
                       "sol_fraction": res.sol_fraction, "eval_wall_s": round(res.eval_wall_s, 2),
                       "stage_s": res.stage_s, "flags": res.flags,
                       "cases": [asdict(c) for c in res.cases]},
                      {**ev.sandbox.info, "timing": asdict(cfg.timing)}))
    finally:
        ev.close()


def write(out: Path, info: dict, pool: Any, args: Any, rows: list, t0: float) -> dict:
    doc = {
        "gpu": info.get("gpu_name", ""), "pool": pool.name, "torch": info.get("torch"),
        "triton": info.get("triton"), "cuda": info.get("driver"), "python": platform.python_version(),
        "timing": info.get("timing"), "jobs": args.jobs, "wall_s": round(time.perf_counter() - t0, 1),
        "n_tasks": len(rows), "n_exec_ok": sum(r["exec_ok"] for r in rows),
        "n_faster_than_eager": sum(bool(r["speedup"] and r["speedup"] > 1) for r in rows),
        "tasks": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    sys.exit(main())
