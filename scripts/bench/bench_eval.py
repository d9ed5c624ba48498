"""Evaluator throughput and timing fidelity on one GPU, side by side with a naive harness.

    python scripts/bench/bench_eval.py [--include ids...] [--mutants 2] [--naive 8] [--jobs 4]
                                       [--repeats 5] [--out scripts/bench/results/bench_eval_h200.json]

Candidates: each included task's solution plus `--mutants` of its mutants (kbx_ray/mutation/:
realistic failing kernels, several candidates per task as in a sweep) plus five failing fixtures.
- ours: warm evaluators (kbx_ray/evaluate/parent/local_evaluators.py), `--jobs` of them sharing the
  GPU, timing alone under the GPU lock; started before the clock, as warm actors are in a sweep;
- naive: the study's protocol, written here: a fresh Python process per candidate, then
  `do_bench(warmup=100, rep=1000)` per case for the candidate and for the eager reference;
- both on the same candidates (the first `--naive` tasks' candidates, for time). Throughput is
  candidate evaluations per GPU-minute (one GPU: GPU time = wall time).
Also, in this order: the physical floor (GPU time the timing itself needs); the CV of each
kernel's median over `--repeats` cold evaluations (values kept); agreement of our timing loop with
do_bench and with CUDA-graph replay, interleaved in one process, plus the sweep's own medians against
do_bench (`in_sweep_*`); `--alt-jobs` evaluator counts; each technique's share of the gain (each
switched off in turn; `--skip shares` keeps the previous run's, `--skip naive cv agreement` measures
the shares alone and keeps the rest, `--skip naive cv shares` the agreement alone). Agreement runs
each method first in turn over five rounds (a power-capped kernel's clock depends on what ran
before) and also reports it over the cases where do_bench and graph replay agree with each other.
Per candidate: wall time and stages, including `lock_wait` and `exclusive` (time waiting for the GPU
lock, time holding it alone). The JSON is rewritten after every step, with the GPU named, so a run
cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

FAILING = ["raises.py", "wrong_values.py", "import_error.py", "torch_compute.py", "segfault.py"]
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TASKS = ["activation/relu", "math/exp", "reduce/sum", "normalization/layer_norm",
                 "fusion/add_gelu", "matrix_multiply/matmul", "loss/cross_entropy",
                 "index/index_select"]


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
    out: dict[str, Any] = {"ok": True, "cases": []}
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


def candidates(include: list[str], n_mutants: int) -> list[tuple[Any, Any, str]]:
    """(task, Candidate, label) for each task's solution and mutants, then the failing fixtures."""
    from kbx_ray.prompting.extract import candidate_id
    from kbx_ray.mutation import mutants_for
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.types import Candidate

    def cand(task: Any, code: str) -> Any:
        return Candidate(candidate_id(task.task_id, code), task.task_id, code, task.name)

    out = []
    for tid in include:
        task = get_task(tid)
        sol = Path(task.solution_path).read_text()
        out.append((task, cand(task, sol), "solution"))
        muts = mutants_for(sol, tid, per_operator=1)
        step = max(1, len(muts) // max(1, n_mutants))
        out += [(task, cand(task, m.code), f"mutant:{m.operator}") for m in muts[::step][:n_mutants]]
    relu = get_task("activation/relu")
    out += [(relu, cand(relu, (ROOT / "tests/fixtures/candidates" / f).read_text()), f"fixture:{f}")
            for f in FAILING]
    return out


def run_ours(cands: list, cfg: Any, jobs: int, cold: bool = False) -> tuple[float, list, dict]:
    from kbx_ray.evaluate.parent.local_evaluators import LocalEvaluators

    with LocalEvaluators(cfg, jobs) as evs:  # warm before the clock, as a sweep's actors are
        t0 = time.perf_counter()
        results = [None] * len(cands)
        for i, res in evs.map([(t, c) for t, c, _ in cands], cold=cold):
            results[i] = res
        return time.perf_counter() - t0, results, evs.info


def run_naive(cands: list) -> tuple[float, list]:
    out, t0 = [], time.perf_counter()
    tmp = Path("/tmp/kbx_naive")
    tmp.mkdir(exist_ok=True)
    for i, (task, cand, _) in enumerate(cands):
        path = tmp / f"cand_{i}.py"
        path.write_text(cand.code)
        p = subprocess.run([sys.executable, __file__, "--naive-worker", task.path, str(path)],
                           capture_output=True, text=True, timeout=600)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else {"ok": False, "error": p.stderr[-200:]})
    return time.perf_counter() - t0, out


def floor_s(results: list) -> float:
    """GPU time the timing itself needs: reps x median for every timed case, both sides."""
    return sum((c.cand_reps or 0) * (c.cand_ms or 0) + (c.ref_reps or 0) * (c.ref_ms or 0)
               for r in results for c in r.cases) / 1e3


def cv_over_repeats(cands: list, cfg: Any, jobs: int, repeats: int) -> dict:
    """Each solution evaluated `repeats` times from cold caches (the reference timed afresh too)."""
    from kbx_ray.evaluate.parent.local_evaluators import LocalEvaluators

    sols = [c for c in cands if c[2] == "solution"]
    per_case: dict[str, list[float]] = {}
    with LocalEvaluators(cfg, jobs) as evs:
        for _ in range(repeats):
            for i, r in evs.map([(t, c) for t, c, _ in sols], cold=True):
                for c in r.cases:
                    if c.cand_ms:
                        per_case.setdefault(f"{sols[i][0].task_id}:{c.case}", []).append(c.cand_ms)
    cvs = {k: statistics.pstdev(v) / statistics.mean(v) for k, v in per_case.items()
           if len(v) == repeats and statistics.mean(v) > 0.02}
    return {"max": max(cvs.values(), default=None),
            "median": statistics.median(cvs.values()) if cvs else None,
            "n_kernels_over_20us": len(cvs), "per_case": cvs,
            "values_ms": {k: v for k, v in per_case.items() if k in cvs}}


METHODS = ["ours", "do_bench", "graph"]


def _timed_by(method: str, call: Any, cfg: Any) -> float:
    import triton.testing

    from graph_timing import graph_median_ms
    from kbx_ray.evaluate.common.timing import bench

    if method == "ours":
        return bench(call, cfg.timing).median_ms
    if method == "do_bench":
        return triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median")
    return graph_median_ms(call)


def agreement(cands: list, results: list, cfg: Any, rounds: int = 3) -> dict:
    """Our timing loop against do_bench and against CUDA-graph replay on the solutions' timed cases,
    interleaved in this one process, so clocks and heat are the same for all three (the headline);
    and the medians the sweep itself reported against do_bench now (`in_sweep`: adds run-to-run
    drift, such as the GPU's clock after a minute of work). `dobench_vs_graph`: how far the two
    references disagree with each other on the same kernel."""
    import torch

    from kbx_ray.suites.task_import import load_module

    db, gr, sweep, dbg, rounds_ms, self_spread = {}, {}, {}, {}, {}, {}
    for (task, cand, label), r in zip(cands, results):
        if label != "solution" or not r.exec_ok:
            continue
        mod, sol = load_module(task.path), load_module(task.solution_path, prefix="sol")
        for cr in r.cases:
            if not cr.cand_ms or cr.cand_ms < 0.02:
                continue
            case = next(c for c in task.cases if c["name"] == cr.case)
            args, kwargs = mod.make_inputs(case, 0, "cuda")
            fn = getattr(sol, task.name)
            key = f"{task.task_id}:{cr.case}"
            got: dict[str, list[float]] = {m: [] for m in METHODS}
            call = functools.partial(fn, *args, **kwargs)
            for rnd in range(rounds):  # each method first in turn: the GPU's clock depends on what ran
                for name in METHODS[rnd % 3:] + METHODS[:rnd % 3]:
                    try:
                        got[name].append(_timed_by(name, call, cfg))
                    except RuntimeError as e:  # a kernel that cannot be captured (host sync inside)
                        gr[key] = f"not capturable: {str(e)[:80]}"
            ours, theirs, graph = got["ours"], got["do_bench"], got["graph"]
            rounds_ms[key] = {m: [round(v, 5) for v in vs] for m, vs in got.items()}
            # how far do_bench disagrees with itself from round to round on this kernel
            self_spread[key] = max(theirs) / min(theirs) - 1 if len(theirs) > 1 else None
            o = statistics.median(ours)
            db[key] = o / statistics.median(theirs)
            sweep[key] = cr.cand_ms / statistics.median(theirs)
            if graph:
                gr[key] = o / statistics.median(graph)
                dbg[key] = statistics.median(theirs) / statistics.median(graph)
            del args, kwargs, call
            torch.cuda.synchronize()

    def devs(d: dict) -> list[float]:
        return [abs(v - 1) for v in d.values() if isinstance(v, float)]

    fair = devs({k: v for k, v in db.items()  # where do_bench and graph replay agree (<= 3%)
                 if isinstance(dbg.get(k), float) and abs(dbg[k] - 1) <= 0.03})
    within = [k for k, v in db.items() if isinstance(self_spread.get(k), float)
              and abs(v - 1) <= max(0.03, self_spread[k])]
    return {"rounds": rounds,
            "dobench_within_3pct_or_its_own_spread": {"cases": len(within), "of": len(db)},
            "dobench_self_spread_max": max((v for v in self_spread.values() if v is not None),
                                           default=None),
            "dobench_where_it_agrees_with_graph": {
                "cases": len(fair), "of": len(db), "max_abs_dev": max(fair, default=None),
                "median_abs_dev": statistics.median(fair) if fair else None},
            "dobench_max_abs_dev": max(devs(db), default=None),
            "dobench_median_abs_dev": statistics.median(devs(db)) if db else None,
            "graph_max_abs_dev": max(devs(gr), default=None),
            "graph_median_abs_dev": statistics.median(devs(gr)) if devs(gr) else None,
            "in_sweep_dobench_max_abs_dev": max(devs(sweep), default=None),
            "in_sweep_dobench_median_abs_dev": statistics.median(devs(sweep)) if sweep else None,
            "dobench_vs_graph_max_abs_dev": max(devs(dbg), default=None),
            "dobench_ratios": db, "graph_ratios": gr, "in_sweep_dobench_ratios": sweep,
            "dobench_vs_graph_ratios": dbg, "dobench_self_spread": self_spread,
            "rounds_ms": rounds_ms}


NAIVE_KEYS = ["ours_wall_s", "naive_wall_s", "ours_evals_per_gpu_min", "naive_evals_per_gpu_min",
              "throughput_ratio", "timing_floor_s_ours", "timing_floor_s_naive", "naive_ok"]


def ratio_fields(doc: dict, sub: list, sub_wall: float, sub_res: list) -> None:
    """Run the naive harness on the side-by-side set and fill the ratio's figures (NAIVE_KEYS)."""
    naive_wall, naive = run_naive(sub)
    ours_rate, naive_rate = 60 * len(sub) / sub_wall, 60 * len(sub) / naive_wall
    naive_cases = sum(len(n.get("cases", [])) for n in naive)
    doc.update(ours_wall_s=round(sub_wall, 2), naive_wall_s=round(naive_wall, 2),
               ours_evals_per_gpu_min=round(ours_rate, 1),
               naive_evals_per_gpu_min=round(naive_rate, 1),
               throughput_ratio=round(ours_rate / naive_rate, 2),
               timing_floor_s_ours=round(floor_s(sub_res), 2),
               timing_floor_s_naive=round(naive_cases * 2 * 1.1, 1),
               naive_ok=[n.get("ok") for n in naive])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--naive-worker":
        naive_worker(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", nargs="*", default=DEFAULT_TASKS)
    ap.add_argument("--mutants", type=int, default=2, help="failing mutants per task")
    ap.add_argument("--naive", type=int, default=4, help="tasks whose candidates both harnesses run")
    ap.add_argument("--jobs", type=int, default=4, help="our evaluators sharing the GPU")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ours-repeats", type=int, default=3,
                    help="runs of ours on the side-by-side set; the ratio uses their median wall")
    ap.add_argument("--alt-jobs", type=int, nargs="*", default=[8],
                    help="other evaluator counts timed on the side-by-side set")
    ap.add_argument("--skip", nargs="*", default=[], choices=["shares", "cv", "agreement", "naive"],
                    help="steps to leave out; their figures are kept from --out's previous run")
    ap.add_argument("--agreement-rounds", type=int, default=5,
                    help="rounds of ours, do_bench and graph replay per kernel, order rotated")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_eval_h200.json"))
    ap.add_argument("--label", default="", help="what was run (a commit), kept in the JSON")
    args = ap.parse_args()
    if "naive" in args.skip and "cv" not in args.skip:
        ap.error("--skip naive goes with --skip cv (the CV is measured on the side-by-side set; a "
                 "shares-only or agreement-only run keeps the ratio and CV from the previous run)")

    from kbx_ray.evaluate.settings import EvalConfig
    from kbx_ray.config.hardware import detect_local, peak_table

    pool = detect_local()
    cfg = EvalConfig(peak_gbps=pool.peak_gbps, peak_tflops=peak_table(pool))
    cands = candidates(args.include, args.mutants)
    sub_tasks = set(args.include[: args.naive])
    sub = [c for c in cands if c[0].task_id in sub_tasks or c[2].startswith("fixture:")]
    out = Path(args.out)
    kept = json.loads(out.read_text()) if args.skip and out.exists() else {}
    doc: dict[str, Any] = {"label": args.label, "jobs": args.jobs, "tasks": args.include,
                           "n_candidates_full": len(cands), "n_candidates_side_by_side": len(sub)}
    for step, keys in {"shares": ["technique_shares"], "cv": ["cv_median", "cv_detail"],
                       "agreement": ["dobench_agreement", "graph_agreement",
                                     "agreement_detail"],
                       "naive": NAIVE_KEYS}.items():
        if step in args.skip and all(k in kept for k in keys):
            doc.update({k: kept[k] for k in keys})
            doc.setdefault("kept_from_previous_run", {"label": kept.get("label", ""),
                                                      "keys": []})["keys"].extend(keys)

    def save() -> None:
        out.write_text(json.dumps(doc, indent=1, default=str))
        print(json.dumps({k: v for k, v in doc.items() if not isinstance(v, (dict, list))},
                         default=str), flush=True)

    wall, results, info = run_ours(cands, cfg, args.jobs)
    doc.update(gpu=info.get("gpu_name"), torch=info.get("torch"), triton=info.get("triton"),
               full_wall_s=round(wall, 2), full_evals_per_gpu_min=round(60 * len(cands) / wall, 1),
               timing_floor_s_full=round(floor_s(results), 2),
               exec_ok={f"{c[0].task_id}:{c[2]}:{i}": r.exec_ok
                        for i, (c, r) in enumerate(zip(cands, results))},
               stage_s_total={k: round(sum(r.stage_s.get(k, 0) for r in results), 2)
                              for k in ("load", "worker_run", "decode", "judge", "correctness",
                                        "timing", "lock_wait", "exclusive")},
               per_candidate={f"{c[0].task_id}:{c[2]}:{i}": {
                   "wall_s": round(r.eval_wall_s, 2), "error_kind": r.error_kind,
                   "stage_s": {k: round(v, 2) for k, v in r.stage_s.items()}}
                   for i, (c, r) in enumerate(zip(cands, results))})
    save()
    # ours takes ~12 s on this set, so scheduling moves one run by +-15%: the median of a few runs
    walls, sub_res = [], None
    for _ in range(1 if {"naive", "shares"} <= set(args.skip) else max(1, args.ours_repeats)):
        w, res, _ = run_ours(sub, cfg, args.jobs)
        walls.append(w)
        sub_res = sub_res or res
    sub_wall = statistics.median(walls)
    doc["sub_walls_s"] = [round(w, 2) for w in walls]
    doc["sub_wall_s_this_run"] = round(sub_wall, 2)  # what technique_shares' slowdowns divide
    if "naive" in args.skip:  # the ratio is kept whole from the previous run, never half-remade
        args.alt_jobs = []
    else:
        ratio_fields(doc, sub, sub_wall, sub_res)
    save()
    if "cv" not in args.skip:
        cv = cv_over_repeats(sub, cfg, args.jobs, args.repeats)
        doc["cv_median"], doc["cv_detail"] = cv["max"], cv
        save()
    if "agreement" not in args.skip:
        agree = agreement(cands, results, cfg, args.agreement_rounds)
        doc["dobench_agreement"], doc["graph_agreement"] = (agree["dobench_max_abs_dev"],
                                                             agree["graph_max_abs_dev"])
        doc["agreement_detail"] = agree
        save()
    naive_rate = doc.get("naive_evals_per_gpu_min")
    for jobs in args.alt_jobs:  # the same set with more (or fewer) evaluators sharing the GPU
        w, _, _ = run_ours(sub, cfg, jobs)
        doc.setdefault("alt_jobs", {})[str(jobs)] = {
            "wall_s": round(w, 2), "evals_per_gpu_min": round(60 * len(sub) / w, 1),
            "throughput_ratio": round(60 * len(sub) / w / naive_rate, 2)}
        save()
    if "shares" in args.skip:
        return 0
    shares = {}
    for name, (over, jobs, cold) in {
            "one_evaluator_per_gpu": ({}, 1, False),
            "cold_caches": ({}, args.jobs, True),
            "fresh_worker_per_candidate": ({"recycle_after": 1}, args.jobs, False),
            "fixed_reps_no_adaptive": ({"timing": replace(cfg.timing, target_rel_ci=0.0)},
                                       args.jobs, False),
            "time_every_case": ({"timing_cases": "all"}, args.jobs, False),
            "three_seeds_on_large_cases": ({"large_seeds": 3}, args.jobs, False)}.items():
        w, _, _ = run_ours(sub, replace(cfg, **over), jobs, cold)
        shares[name] = {"wall_s": round(w, 2), "slowdown_vs_ours": round(w / sub_wall, 2)}
        doc["technique_shares"] = shares
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
