"""Evaluate every task's own solution on the local GPU through the real evaluator; write JSON.

    python scripts/bench/suite_gpu.py [--out scripts/bench/results/suite_h200.json] [--include ...]
                                      [--jobs N] [--gpu-mem-budget GB]

This is the oracle run that validates the suite and the harness on a new GPU: every solution must
come out exec_ok, and the file records speedup over eager and the SOL fraction per task and case.
No Ray needed: the evaluators are the ones the evaluator actors hold. `--jobs N` runs N of them on
the GPU at once (kbx_ray/evaluate/parent/local_evaluators.py): they compile and check in parallel,
and the GPU lock makes every timing run alone. Each evaluation first reserves its estimated peak
memory in the GPU's ledger (kbx_ray/evaluate/parent/admission.py) against `--gpu-mem-budget` GB
(default: the device's total minus evaluation.gpu_mem_reserve_gb), waiting while the other jobs'
reservations leave too little; an OOM while other jobs held memory is infra_error and retried alone
by the evaluator itself. A task still filed infra_error for memory is retried alone at the end. The
file is rewritten after every task, so a run cut short keeps what it did.
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import threading
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kbx_ray.evaluate.parent.local_evaluators import LocalEvaluators
from kbx_ray.evaluate.settings import EvalConfig, Landlock
from kbx_ray.prompting.extract import candidate_id
from kbx_ray.config.hardware import detect_local, peak_table
from kbx_ray.cases import footprint
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Task

log = logging.getLogger("suite_gpu")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--include", nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=1.0, help="timing budget per case and side")
    ap.add_argument("--jobs", type=int, default=1, help="evaluators sharing the GPU")
    ap.add_argument("--order", choices=("given", "memory"), default="given",
                    help="memory: the largest tasks by footprint interleaved with the smallest "
                         "(unproven: its one H100 run had OOM retries that mask the order's effect)")
    ap.add_argument("--gpu-mem-budget", type=float, default=0.0,
                    help="GB of device memory the jobs' evaluations reserve from together (0: the "
                         "device's total minus evaluation.gpu_mem_reserve_gb)")
    ap.add_argument("--profile", default="", metavar="DIR",
                    help="write each evaluation's cProfile stats (the evaluator's process) to DIR, "
                         "and each sandbox worker's (judging and replay; Landlock off) to DIR/workers")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pool = detect_local()
    out = Path(args.out or f"scripts/bench/results/suite_{pool.name}.json")
    cfg = EvalConfig(peak_gbps=pool.peak_gbps, peak_tflops=peak_table(pool))
    cfg.timing.budget_s = args.budget_s
    cfg.gpu_mem_budget_gb = args.gpu_mem_budget  # every job admits through one ledger per GPU
    cfg.ref_cache_mb = 1024  # one candidate per task: a big cache only crowds the other jobs
    if args.profile:  # the workers write their stats outside their temp dirs: Landlock off
        Path(args.profile, "workers").mkdir(parents=True, exist_ok=True)
        cfg.sandbox.extra_env["KBX_WORKER_PROFILE"] = str(Path(args.profile, "workers").resolve())
        cfg.sandbox.landlock = Landlock.off
    tasks = load_suite(include=args.include)
    if args.order == "memory":
        tasks = interleaved(tasks)
    rows: dict[str, dict] = {}
    t0 = time.perf_counter()
    busy = GpuBusy()
    info = _pass(tasks, cfg, args.jobs, rows, out, pool, t0, busy, args.profile)
    oom = [t for t in tasks if rows.get(t.task_id, {}).get("error_kind") == ErrorKind.INFRA_ERROR
           and "out of memory" in rows[t.task_id]["error_msg"].lower()]
    if oom and args.jobs > 1:  # the jobs' memory together ran out, not the task's: retry alone
        log.info("retrying %d tasks that ran out of GPU memory beside other jobs, alone", len(oom))
        info = _pass(oom, cfg, 1, rows, out, pool, t0, busy) or info
    doc = write(out, info, pool, cfg, args.jobs, list(rows.values()), t0, busy.stop())
    log.info("%d/%d solutions correct on %s; %d faster than eager; wrote %s", doc["n_exec_ok"],
             len(tasks), doc["gpu"], doc["n_faster_than_eager"], out)
    return 0 if doc["n_exec_ok"] == len(tasks) else 1


def _pass(tasks: list[Task], cfg: EvalConfig, jobs: int, rows: dict, out: Path, pool: Any,
          t0: float, busy: "GpuBusy", profile: str = "") -> dict:
    pairs = []
    for task in tasks:
        code = Path(task.solution_path).read_text()
        pairs.append((task, Candidate(candidate_id(task.task_id, code), task.task_id, code,
                                      task.name)))
    with LocalEvaluators(cfg, jobs, cache_mb=1024, profile_dir=profile) as evs:
        for i, res in evs.map(pairs):
            row = _row(tasks[i], res)
            rows[row["task_id"]] = row
            log.info("%-32s exec_ok=%s speedup=%s sol=%s %s %.1fs %s", row["task_id"],
                     row["exec_ok"], f"{res.speedup:.2f}" if res.speedup else "-",
                     f"{res.sol_fraction:.1%}" if res.sol_fraction else "-", res.error_kind,
                     res.eval_wall_s, res.error_msg[:300].replace("\n", " | "))
            write(out, evs.info, pool, cfg, jobs, list(rows.values()), t0, busy.summary())
        return evs.info


def _row(task: Task, res: EvalResult) -> dict:
    return {"task_id": task.task_id, "category": task.category, "exec_ok": res.exec_ok,
            "error_kind": res.error_kind, "error_msg": res.error_msg, "speedup": res.speedup,
            "sol_fraction": res.sol_fraction, "eval_wall_s": round(res.eval_wall_s, 2),
            "stage_s": res.stage_s, "flags": res.flags, "cases": [asdict(c) for c in res.cases]}


def interleaved(tasks: list[Task]) -> list[Task]:
    """Largest, smallest, next largest, ... by the largest case's footprint (cases/footprint.py,
    the admission's own measure): neighbours in the queue run at once."""
    def size(task: Task) -> int:
        try:
            mod = load_module(task.path)
            return max(footprint.size(mod, c) for c in task.cases)
        except Exception:  # noqa: BLE001 - only the order depends on it
            return 0
    ranked = sorted(tasks, key=size, reverse=True)
    out = []
    while ranked:
        out.append(ranked.pop(0))
        if ranked:
            out.append(ranked.pop())
    return out


class GpuBusy:
    """nvidia-smi's utilization.gpu sampled every 200 ms while the run lasts, read by a thread: the
    share of samples in which no kernel ran at all (the GPU idle while evaluators compile,
    compare or wait), written with every rewrite of the file (a run cut short keeps it). Beside
    it, the host's CPUs (/proc/stat, each second): a GPU idle while every core is busy waits on
    the host, not on the lock. And the device's memory in use (memory.used of memory.total): how
    full the evaluators kept it, and the share of samples with under 2 GiB free."""

    def __init__(self) -> None:
        self.xs: list[float] = []
        self.mem: list[tuple[float, float]] = []  # (used, total) MiB
        self.cpu: list[float] = []
        threading.Thread(target=self._cpu, daemon=True).start()
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used,memory.total",
                 "--format=csv,noheader,nounits",
                 "-lms", "200"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                util, used, total = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.xs.append(util)
            self.mem.append((used, total))

    def _cpu(self) -> None:
        last = _cpu_times()
        while last is not None:
            time.sleep(1.0)
            now = _cpu_times()
            if now is None or now[1] <= last[1]:
                return
            self.cpu.append(100.0 * (now[0] - last[0]) / (now[1] - last[1]))
            last = now

    def summary(self) -> dict:
        xs, cpu, mem = list(self.xs), list(self.cpu), list(self.mem)
        got = {"cpu_busy_mean_pct": round(sum(cpu) / len(cpu), 1),
               "cpu_busy_p90_pct": round(sorted(cpu)[int(0.9 * (len(cpu) - 1))], 1)} if cpu else {}
        if mem:
            got.update(gpu_mem_used_mean_gib=round(sum(u for u, _ in mem) / len(mem) / 1024, 1),
                       gpu_mem_used_max_gib=round(max(u for u, _ in mem) / 1024, 1),
                       gpu_mem_full_share=round(sum(t - u < 2048 for u, t in mem) / len(mem), 3))
        if not xs:
            return got
        return {"gpu_util_mean_pct": round(sum(xs) / len(xs), 1), "gpu_samples": len(xs),
                "gpu_idle_share": round(sum(x == 0 for x in xs) / len(xs), 3), **got}

    def stop(self) -> dict:
        if self.proc is not None:
            self.proc.terminate()
        return self.summary()


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies over every core since boot (/proc/stat), None where there is none."""
    try:
        with open("/proc/stat") as f:
            xs = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = xs[3] + (xs[4] if len(xs) > 4 else 0.0)  # idle + iowait
    return sum(xs) - idle, sum(xs)


def write(out: Path, info: dict, pool: Any, cfg: EvalConfig, jobs: int, rows: list,
          t0: float, busy: dict | None = None) -> dict:
    rows = sorted(rows, key=lambda r: r["task_id"])
    doc = {
        "gpu": info.get("gpu_name", ""), "pool": pool.name, "torch": info.get("torch"),
        "triton": info.get("triton"), "cuda": info.get("driver"), "python": platform.python_version(),
        "timing": asdict(cfg.timing), "jobs": jobs, "gpu_mem_budget_gb": cfg.gpu_mem_budget_gb,
        "n_oom_shared_gpu": sum("oom_shared_gpu" in r["flags"] for r in rows),
        "wall_s": round(time.perf_counter() - t0, 1),
        "n_tasks": len(rows), "n_exec_ok": sum(r["exec_ok"] for r in rows),
        "n_faster_than_eager": sum(bool(r["speedup"] and r["speedup"] > 1) for r in rows),
        "stage_s_total": {k: round(sum(r["stage_s"].get(k, 0.0) for r in rows), 2)
                          for k in sorted({k for r in rows for k in r["stage_s"]})},
        **(busy or {}),
        "tasks": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    sys.exit(main())
