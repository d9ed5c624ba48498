"""Ahead-of-time Triton compiles (engine.aot_compile): coverage on a CPU machine, gain on a GPU.

    python scripts/bench/bench_aot.py [--include ids...] [--arch 90] [--jobs 2]
        [--out scripts/bench/results/bench_aot_cpu.json]
    python scripts/bench/bench_aot.py --gpu [--include ...] [--out .../bench_aot_h200.json]

CPU (no GPU needed): every included task's solution through `evaluate/aot.compile_candidate`, as a
compile node runs it (sandboxed, fake tensors, Triton pointed at sm_`--arch`), `--jobs` at a time.
Per task: the cases traced, the kernels compiled, the wall time; in all: the share of cases whose
kernels are compiled ahead, and wall seconds per candidate on one core (a fresh sandboxed process
each: about 2 s of it is importing torch and Triton).

GPU (`--gpu`): the same solutions evaluated twice by one warm evaluator, each time in a fresh Triton
cache: cold (the worker compiles, as without the compile workers), then seeded with the kernels
compiled ahead for this GPU's sm_XX (what the compile workers ship). Side by side per task: the
evaluator's wall time and its correctness stage (where the worker's JIT compiles happen); the
ratio of their sums is the GPU time the compile workers take off the evaluators. New kernels seen
by the seeded worker (cache misses) are counted too: zero means every key matched.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _solutions(include: list[str] | None):  # noqa: ANN202
    from kbx_ray.prompting.extract import candidate_id
    from kbx_ray.suites.builtin import load_suite
    from kbx_ray.types import Candidate

    out = []
    for t in load_suite(include=include or None):
        code = Path(t.solution_path).read_text()
        out.append((t, Candidate(candidate_id(t.task_id, code), t.task_id, code, t.name)))
    return out


def cpu(args: argparse.Namespace) -> dict:
    from kbx_ray.evaluate.parent.aot import compile_candidate

    sols = _solutions(args.include)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as threads:
        results = list(threads.map(lambda tc: compile_candidate(tc[0], tc[1], args.arch), sols))
    wall = time.perf_counter() - t0
    per_task = {t.task_id: r.summary() for (t, _), r in zip(sols, results)}
    untraced = {t.task_id: {k: v for k, v in r.cases.items() if v != "ok"}
                for (t, _), r in zip(sols, results) if any(v != "ok" for v in r.cases.values())}
    cases = sum(len(r.cases) for r in results)
    traced = sum(v == "ok" for r in results for v in r.cases.values())
    return {"arch": args.arch, "tasks": len(sols), "cases": cases, "cases_traced": traced,
            "traced_share": round(traced / max(1, cases), 4),
            "tasks_fully_traced": sum(all(v == "ok" for v in r.cases.values()) and bool(r.cases)
                                      for r in results),
            "tasks_with_kernels": sum(r.kernels > 0 for r in results),
            "kernels": sum(r.kernels for r in results),
            "errors": {t.task_id: r.error for (t, _), r in zip(sols, results) if r.error},
            "wall_s": round(wall, 1), "jobs": args.jobs,
            "wall_s_per_candidate": round(sum(r.wall_s for r in results) / max(1, len(results)), 2),
            "untraced": untraced, "per_task": per_task}


def _kernels(cache: Path) -> set[str]:
    """Cache keys holding a compiled kernel (Triton caches its launchers there too)."""
    return {p.parent.name for p in cache.glob("*/*.cubin")}


def gpu_summary(rows: dict, arch: int, gpu_name: str) -> dict:
    """Sums over the tasks measured so far (the file is rewritten after each one)."""
    cold = sum(r["cold"]["wall_s"] for r in rows.values())
    seeded = sum(r["seeded"]["wall_s"] for r in rows.values())
    return {"gpu": gpu_name, "arch": arch, "tasks": len(rows),
            "cold_wall_s": round(cold, 2), "seeded_wall_s": round(seeded, 2),
            "evaluator_speedup": round(cold / max(seeded, 1e-9), 3),
            "seeded_misses": sum(r["seeded"]["new_kernels"] for r in rows.values()),
            "per_task": rows}


def gpu(args: argparse.Namespace, save: Any = None) -> dict:
    import torch

    from kbx_ray.evaluate.parent.aot import compile_candidate
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    from kbx_ray.evaluate.settings import SandboxConfig
    from kbx_ray.types import Stage

    major, minor = torch.cuda.get_device_capability()
    arch = major * 10 + minor
    rows: dict = {}
    for task, cand in _solutions(args.include):
        aot = compile_candidate(task, cand, arch)
        row: dict = {"kernels_ahead": aot.kernels, "aot_cpu_s": round(aot.wall_s, 2)}
        for mode in ("cold", "seeded"):
            ev = Evaluator(EvalConfig(device="cuda", sandbox=SandboxConfig(device="cuda")))
            try:
                ev.sandbox.request({"op": "hello"}, 300)  # warm, as an evaluator actor is
                if mode == "seeded":  # into the worker's own cache, as the evaluator actor does
                    ev.sandbox.seed_triton(aot.files)
                cache = Path(ev.sandbox.home) / "triton_cache"
                before = _kernels(cache)
                t0 = time.perf_counter()
                res = ev.evaluate(task, cand)
                row[mode] = {"wall_s": round(time.perf_counter() - t0, 3), "exec_ok": res.exec_ok,
                             # JIT compiles happen inside the worker's calls of the correctness stage
                             "correctness_s": round(res.stage_s.get(Stage.CORRECTNESS, 0.0), 3),
                             "w_call_s": round(res.stage_s.get("w_call", 0.0), 3),
                             "new_kernels": len(_kernels(cache) - before)}
            finally:
                ev.close()
        rows[task.task_id] = row
        print(task.task_id, row, flush=True)
        if save is not None:  # a run cut short by a call limit still leaves its tasks
            save(gpu_summary(rows, arch, torch.cuda.get_device_name(0)))
    return gpu_summary(rows, arch, torch.cuda.get_device_name(0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", nargs="*", default=[])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import triton

    doc = {"benchmark": "bench_aot", "label": args.label, "triton": triton.__version__,
           "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"}
    out = Path(args.out or ROOT / "scripts/bench/results" /
               ("bench_aot_h200.json" if args.gpu else "bench_aot_cpu.json"))
    n = len(args.include) if args.include else "all"
    doc.update(gpu(args, lambda part: out.write_text(json.dumps(
        {**doc, **part, "partial": f"{part['tasks']} of {n} tasks"}, indent=1) + "\n"))
               if args.gpu else cpu(args))
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if not isinstance(v, dict)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
