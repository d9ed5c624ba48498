"""Evaluator throughput and timing fidelity on one GPU, side by side with a naive harness.

    python scripts/bench/bench_eval.py [--naive N] [--out scripts/bench/results/bench_eval_h200.json]

- ours: the warm sandboxed evaluator (kbx_ray.evaluate.Evaluator) over the suite's solutions plus
  failing candidates;
- naive: the study's protocol, written here: a fresh Python process per candidate, then
  `do_bench(warmup=100, rep=1000)` per case for the candidate and for the eager reference;
- both on the same candidates (the naive run on the first N of them, for time); throughput is
  candidate evaluations per GPU-minute (one GPU, so GPU time = wall time).
Also: the physical floor (GPU time the timing itself needs), CV of each kernel's median over 5
repeated evaluations, agreement with do_bench, and each technique's share of the gain (by switching
it off). Writes JSON with the GPU named.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

FAILING = ["raises.py", "wrong_values.py", "import_error.py", "torch_compute.py", "segfault.py"]
ROOT = Path(__file__).resolve().parents[2]


def naive_worker(task_path: str, cand_path: str) -> None:
    """One candidate, the study's way, in this fresh process; prints one JSON line."""
    import importlib.util

    import torch
    import triton.testing

    def load(name: str, path: str):  # noqa: ANN202
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    torch.manual_seed(0)
    task = load("task", task_path)
    name = Path(task_path).parent.name
    out = {"ok": True, "cases": []}
    try:
        cand = getattr(load("cand", cand_path), name)
        ref = getattr(task, name)
        for case in task.CASES:
            args, kwargs = task.make_inputs(case, 0, "cuda")
            clone = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            got, want = cand(*args, **kwargs), ref(*clone, **kwargs)
            if isinstance(want, torch.Tensor) and not torch.allclose(
                    got.float(), want.float(), rtol=1e-2, atol=1e-2, equal_nan=True):
                out["ok"] = False
                break
            c = triton.testing.do_bench(lambda: cand(*args, **kwargs), warmup=100, rep=1000)
            r = triton.testing.do_bench(lambda: ref(*clone, **kwargs), warmup=100, rep=1000)
            out["cases"].append({"case": case["name"], "cand_ms": c, "ref_ms": r})
    except Exception as e:  # noqa: BLE001 - the naive harness records and moves on
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:200]}
    print(json.dumps(out))


def candidates(include: list[str] | None) -> list[tuple]:
    from kbx_ray.suite import get_task, load_suite

    tasks = load_suite(include=include)
    cands = [(t, Path(t.solution_path)) for t in tasks]
    relu = get_task("activation/relu")
    cands += [(relu, ROOT / "tests/fixtures/candidates" / f) for f in FAILING]
    return cands


def run_ours(cands: list[tuple], **overrides: object) -> tuple[float, list]:
    from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator
    from kbx_ray.extract import candidate_id
    from kbx_ray.hardware import detect_local, peak_table
    from kbx_ray.types import Candidate

    pool = detect_local()
    cfg = EvalConfig(peak_gbps=pool.peak_gbps,
                     peak_tflops=peak_table(pool))
    for k, v in overrides.items():
        if k.startswith("timing."):
            setattr(cfg.timing, k[7:], v)
        elif k != "no_caches":
            setattr(cfg, k, v)
    ev = Evaluator(cfg)
    ev.sandbox.request({"op": "hello"}, 120)  # spawn outside the clock, as a warm actor would be
    results, t0 = [], time.perf_counter()
    for task, path in cands:
        if overrides.get("no_caches"):
            ev.ref_times.clear(), ev.ref_outputs.clear(), ev.inputs.clear()
        code = path.read_text()
        results.append((task, path, ev.evaluate(task, Candidate(candidate_id(task.task_id, code),
                                                                task.task_id, code, task.name))))
    wall = time.perf_counter() - t0
    ev.close()
    return wall, results


def run_naive(cands: list[tuple]) -> tuple[float, list]:
    out, t0 = [], time.perf_counter()
    for task, path in cands:
        p = subprocess.run([sys.executable, __file__, "--naive-worker", task.path, str(path)],
                           capture_output=True, text=True, timeout=600)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else {"ok": False, "error": p.stderr[-200:]})
    return time.perf_counter() - t0, out


def cv_over_repeats(cands: list[tuple], repeats: int) -> dict:
    solutions = [c for c in cands if "solution" in c[1].name]
    per_case: dict[str, list[float]] = {}
    for _ in range(repeats):
        _, res = run_ours(solutions)
        for task, _, r in res:
            for c in r.cases:
                if c.cand_ms:
                    per_case.setdefault(f"{task.task_id}:{c.case}", []).append(c.cand_ms)
    cvs = {k: statistics.pstdev(v) / statistics.mean(v) for k, v in per_case.items()
           if len(v) == repeats and statistics.mean(v) > 0.02}
    return {"max": max(cvs.values(), default=None), "median": statistics.median(cvs.values())
            if cvs else None, "n_kernels_over_20us": len(cvs), "per_case": cvs}


def dobench_agreement(results: list) -> dict:
    import torch
    import triton.testing

    from kbx_ray.suite import load_module

    ratios = {}
    for task, path, r in results:
        if not r.exec_ok or "solution" not in path.name:
            continue
        mod, sol = load_module(task.path), load_module(path, prefix="sol")
        for case, cr in zip([c for c in task.cases], r.cases):
            if not cr.cand_ms or cr.cand_ms < 0.02:
                continue
            args, kwargs = mod.make_inputs(case, 0, "cuda")
            fn = getattr(sol, task.name)
            db = triton.testing.do_bench(lambda: fn(*args, **kwargs), warmup=25, rep=200,
                                         return_mode="median")
            ratios[f"{task.task_id}:{case['name']}"] = cr.cand_ms / db
            torch.cuda.synchronize()
    dev = [abs(v - 1) for v in ratios.values()]
    return {"max_abs_dev": max(dev, default=None), "median_abs_dev": statistics.median(dev) if dev else None,
            "ratios": ratios}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--naive-worker":
        naive_worker(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", nargs="*", default=None)
    ap.add_argument("--naive", type=int, default=10, help="candidates for the naive harness")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_eval_h200.json"))
    args = ap.parse_args()
    cands = candidates(args.include)
    sub = cands[: max(1, args.naive - len(FAILING))] + cands[-len(FAILING):]
    wall, results = run_ours(cands)
    sub_wall, _ = run_ours(sub)
    naive_wall, naive = run_naive(sub)
    ours_rate, naive_rate = 60 * len(sub) / sub_wall, 60 * len(sub) / naive_wall
    floor_s = sum(c.cand_reps * c.cand_ms + c.ref_reps * c.ref_ms for _, _, r in results
                  for c in r.cases if c.cand_ms and c.ref_ms) / 1e3
    shares = {}
    for name, ov in {"fresh_worker_per_candidate": {"recycle_after": 1},
                     "no_caches": {"no_caches": True},
                     "fixed_reps_no_adaptive": {"timing.target_rel_ci": 0.0}}.items():
        w, _ = run_ours(sub, **ov)
        shares[name] = {"wall_s": round(w, 2), "slowdown_vs_ours": round(w / sub_wall, 2)}
    doc = {
        "gpu": results[0][2].gpu_name, "torch": results[0][2].torch_version,
        "triton": results[0][2].triton_version,
        "n_candidates_full": len(cands), "full_wall_s": round(wall, 2),
        "full_evals_per_gpu_min": round(60 * len(cands) / wall, 1),
        "n_candidates_side_by_side": len(sub), "ours_wall_s": round(sub_wall, 2),
        "naive_wall_s": round(naive_wall, 2), "ours_evals_per_gpu_min": round(ours_rate, 1),
        "naive_evals_per_gpu_min": round(naive_rate, 1), "throughput_ratio": round(ours_rate / naive_rate, 2),
        "timing_floor_s_full": round(floor_s, 2),
        "exec_ok": {f"{t.task_id}:{p.name}": r.exec_ok for t, p, r in results},
        "naive_ok": [n.get("ok") for n in naive],
        "technique_shares": shares,
        "cv_median": None, "dobench_agreement": None,
    }
    cv = cv_over_repeats(sub, args.repeats)
    doc["cv_median"], doc["cv_detail"] = cv["max"], cv
    agree = dobench_agreement(results)
    doc["dobench_agreement"], doc["dobench_detail"] = agree["max_abs_dev"], agree
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps({k: v for k, v in doc.items() if not isinstance(v, dict)}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
