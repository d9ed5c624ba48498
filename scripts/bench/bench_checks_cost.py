"""What issue 26's new checks cost on the CPU suite, side by side with the tree before them.

    python scripts/bench/bench_checks_cost.py [--tasks 24] [--repeats 5] [--include ids...]
        [--base 9a3742f] [--current worktree|REV] [--out results/bench_checks_cost_cpu.json]

Why: issue 26 asks that "the cost of the new checks on the CPU suite is measured and stated". The
checks (marked host numbers, host_values.py; unseen cases, kbx_ray/unseen.py; default deny at
dispatch, ledger.py; a secret share of watched timed calls) landed after `--base`. On the CPU the
timing protocol is skipped, so the watched timed calls cost nothing here; the rest does.

How: each tree gets a warm Evaluator(EvalConfig(device="cpu")) in its own process whose PYTHONPATH
is that tree (its sandbox worker imports the same tree, spawn._PKG_ROOT; checked in the hello),
and the current tree a second one with unseen_cases=0, so the unseen cases' share shows. Each
evaluates the task's own solution.py on the small cases, as tests/integration/test_conformance.py
does (its fixed unseen seed per task, so every run draws the same case). Per task the three run
back to back, --repeats rounds in the order ABC CBA ..., so load drift cancels, and each keeps its
least wall (the box is shared). The base is `git archive`d; the current tree is a copy of the
checkout as it is (uncommitted edits included, listed in the JSON) or a REV. Every evaluation must
pass: one that does not is a false verdict, printed first. Wall seconds per evaluation, the ratios
and the host go to --out, rewritten after every task.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
TAG = "BENCH "  # reply lines from a serving process start with this (logs may share stdout)
WARMUP = "activation/relu"
ARMS = ("base", "current", "current_no_unseen")


def serve(unseen: int) -> None:
    """Serving process: one warm Evaluator of the tree on PYTHONPATH; task ids in, verdicts out."""
    import kbx_ray
    import torch
    import triton
    try:
        from kbx_ray.evaluate.parent import sandbox
        from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    except ModuleNotFoundError:  # a tree before evaluate/parent/ (issue 30), such as the base
        from kbx_ray.evaluate import sandbox  # type: ignore[no-redef]
        from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator  # type: ignore[no-redef]
    from kbx_ray.prompting.extract import candidate_id
    from kbx_ray.suites.builtin import load_suite
    from kbx_ray.types import Candidate, stable_hash

    cfg = EvalConfig(device="cpu", case_timeout_s=180, load_timeout_s=180)
    if unseen >= 0:
        cfg.unseen_cases = unseen
    ev = Evaluator(cfg)
    ev._unseen_seed = lambda t: int(stable_hash(t.task_id), 16)  # as test_conformance: fixed
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed stays off the reply channel
    spawn = sys.modules.get("kbx_ray.evaluate.parent.spawn", sandbox)  # older trees: the sandbox
    reply(out, {"kbx_ray": kbx_ray.__file__, "pkg_root": str(spawn._PKG_ROOT),
                "torch": torch.__version__, "triton": triton.__version__})
    for line in sys.stdin:
        tid = line.strip()
        (task,) = load_suite(include=[tid])
        code = Path(task.solution_path).read_text()
        t0 = time.perf_counter()
        res = ev.evaluate(task, Candidate(candidate_id(tid, code), tid, code, task.name))
        wall = time.perf_counter() - t0
        reply(out, {"task": tid, "wall_s": round(wall, 4), "eval_wall_s": round(res.eval_wall_s, 4),
                    "pass": bool(res.exec_ok and res.call_ok and res.stage == "done"),
                    "error_kind": res.error_kind, "error_msg": (res.error_msg or "")[:400],
                    "n_cases": len(res.cases), "n_unseen": len(getattr(res, "unseen_cases", [])),
                    "stage_s": res.stage_s, "load1": os.getloadavg()[0]})
    ev.close()


def reply(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(TAG + json.dumps(obj) + "\n")
    out.flush()


class Arm:
    """A serving process on one tree."""

    def __init__(self, name: str, tree: Path, unseen: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        self.name, self.tree = name, tree
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(unseen)], cwd=tree,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.hello = self.read()
        for key in ("kbx_ray", "pkg_root"):  # the parent and its sandbox worker import this tree
            if not Path(self.hello[key]).resolve().is_relative_to(tree.resolve()):
                raise RuntimeError(f"{name} imports another tree: {self.hello}")

    def read(self) -> dict[str, Any]:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
        raise RuntimeError(f"{self.name}: the serving process ended (rc {self.proc.wait()})")

    def evaluate(self, tid: str) -> dict[str, Any]:
        self.proc.stdin.write(tid + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.rstrip()


def extract(rev: str) -> tuple[Path, dict[str, Any]]:
    """The tree to evaluate with: `rev`'s kbx_ray/ and tasks/, or the checkout as it is."""
    head = git("rev-parse", "HEAD")
    if rev == "worktree":
        status = git("status", "--porcelain", "--", "kbx_ray", "tasks")
        dirty = [ln[3:] for ln in status.splitlines()]
        dest = Path(f"/tmp/kbx_bench_worktree_{os.getpid()}")
        for sub in ("kbx_ray", "tasks"):  # a copy: edits made during the run do not reach it
            shutil.copytree(ROOT / sub, dest / sub, ignore=shutil.ignore_patterns("__pycache__"))
        diff = git("diff", "HEAD", "--", "kbx_ray", "tasks")
        return dest, {"rev": "worktree", "commit": head, "uncommitted": dirty,
                      "uncommitted_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12]}
    sha = git("rev-parse", rev)
    dest = Path(f"/tmp/kbx_bench_{sha[:12]}")
    if not (dest / "kbx_ray").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha, "kbx_ray", "tasks"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest, {"rev": rev, "commit": sha}


def sample(tree: Path, n: int, include: list[str] | None) -> list[str]:
    """`include`'s ids (exact, category or glob), else `n` tasks round-robin over the categories,
    each category's tasks in a fixed hashed order."""
    ids = sorted(p.parent.relative_to(tree / "tasks").as_posix()
                 for p in (tree / "tasks").glob("*/*/task.py"))
    if include:
        return [i for i in ids if any(i == p or i.split("/")[0] == p or fnmatch.fnmatch(i, p)
                                      for p in include)]
    by_cat: dict[str, list[str]] = {}
    for i in ids:
        by_cat.setdefault(i.split("/")[0], []).append(i)
    for cat in by_cat:
        by_cat[cat].sort(key=lambda i: hashlib.sha1(i.encode()).hexdigest())
    picked: list[str] = []
    for r in range(max(map(len, by_cat.values()))):
        picked += [ts[r] for ts in by_cat.values() if r < len(ts)]
    return picked[:n]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def write(out: str, meta: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures so far to `out` (rewritten after every task: a run cut short keeps them)."""
    failures = [{"task": r["task"], "arm": a, "error_kind": x["error_kind"],
                 "error_msg": x["error_msg"]}
                for r in rows for a in ARMS for x in r[a]["runs"] if not x["pass"]]
    best = {a: sum(r[a]["wall_s"] for r in rows) for a in ARMS}
    mean = {a: sum(r[a]["mean_s"] for r in rows) for a in ARMS}
    ratios = lambda a, key: [r[a][key] / r["base"][key] for r in rows]  # noqa: E731
    summary = {
        "n_tasks": len(rows), "n_failures": len(failures),
        "per_eval_s_best_of_repeats": {a: {
            "median": round(statistics.median(r[a]["wall_s"] for r in rows), 3),
            "mean": round(best[a] / len(rows), 3)} for a in ARMS},
        "total_s_best_of_repeats": {a: round(v, 2) for a, v in best.items()},
        "ratio_current_over_base": {
            "geomean": round(geomean(ratios("current", "wall_s")), 3),
            "total": round(best["current"] / best["base"], 3),
            "geomean_of_means": round(geomean(ratios("current", "mean_s")), 3),
            "total_of_means": round(mean["current"] / mean["base"], 3)},
        "ratio_no_unseen_over_base": {
            "geomean": round(geomean(ratios("current_no_unseen", "wall_s")), 3),
            "total": round(best["current_no_unseen"] / best["base"], 3)},
        "unseen_share_of_current_total": round(
            (best["current"] - best["current_no_unseen"]) / best["current"], 3),
    }
    doc = {
        "benchmark": meta["benchmark"], "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hardware": {"cpu_model": cpu_model(), "cores": os.cpu_count(),
                     "cores_usable": len(os.sched_getaffinity(0)), "gpu": None,
                     "loadavg_start": meta["loadavg_start"], "loadavg_end": os.getloadavg()},
        "elapsed_s": round(time.time() - meta["t_start"], 1),
        "base": meta["base"], "current": meta["current"], "versions": meta["versions"],
        "protocol": "each arm a warm Evaluator(EvalConfig(device='cpu', case_timeout_s=180, "
                    "load_timeout_s=180)) in its own process on its tree; the task's solution.py, "
                    "small cases x seeds plus (current) one unseen case drawn from the task's "
                    "fixed seed (test_conformance); per task the arms back to back, "
                    f"{meta['repeats']} rounds in ABC CBA order; one untimed warm-up evaluation "
                    "per arm; wall_s: the least of the rounds' walls around Evaluator.evaluate",
        "summary": summary, "failures": failures, "rows": rows,
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=int, default=24, help="sample size over all categories")
    ap.add_argument("--repeats", type=int, default=5, help="rounds per task and arm (best kept)")
    ap.add_argument("--include", nargs="*", help="task ids, categories or globs (no sampling)")
    ap.add_argument("--base", default="9a3742f", help="the tree before the checks")
    ap.add_argument("--current", default="worktree", help="'worktree' (the checkout) or a rev")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_checks_cost_cpu.json"))
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    load_start, t_start = os.getloadavg(), time.time()
    base_tree, base_info = extract(args.base)
    cur_tree, cur_info = extract(args.current)
    tids = sample(cur_tree, args.tasks, args.include)
    dirty = cur_info.get("uncommitted")
    print(f"{len(tids)} tasks; base {base_info['commit'][:10]}, current {cur_info['commit'][:10]}"
          + (f" + uncommitted {dirty}" if dirty else ""), flush=True)
    arms = {"base": Arm("base", base_tree, -1), "current": Arm("current", cur_tree, -1),
            "current_no_unseen": Arm("current_no_unseen", cur_tree, 0)}
    for arm in arms.values():  # untimed: the sandbox worker's first start and Triton's imports
        arm.evaluate(WARMUP)
    rows: list[dict[str, Any]] = []
    meta = {"benchmark": "bench_checks_cost", "loadavg_start": load_start, "t_start": t_start,
            "base": base_info, "current": cur_info, "repeats": args.repeats,
            "versions": {a: {k: arms[a].hello[k] for k in ("torch", "triton")} for a in ARMS}}
    for k, tid in enumerate(tids):
        runs: dict[str, list[dict[str, Any]]] = {a: [] for a in ARMS}
        for rep in range(args.repeats):  # ABC CBA ...: drift cancels within the task
            for name in ARMS if (k * args.repeats + rep) % 2 == 0 else ARMS[::-1]:
                runs[name].append(arms[name].evaluate(tid))
        row: dict[str, Any] = {"task": tid}
        for a in ARMS:
            walls = [r["wall_s"] for r in runs[a]]
            row[a] = {"wall_s": min(walls), "mean_s": round(statistics.fmean(walls), 4),
                      "pass": all(r["pass"] for r in runs[a]), "runs": runs[a]}
        row["ratio"] = row["current"]["wall_s"] / row["base"]["wall_s"]
        rows.append(row)
        print(f"{tid:40s} " + " ".join(f"{a}={row[a]['wall_s']:6.2f}s" for a in ARMS)
              + f"  x{row['ratio']:.2f}" + "".join(f"  FAIL[{a}]" for a in ARMS
                                                     if not row[a]["pass"]), flush=True)
        summary = write(args.out, meta, rows)
    for arm in arms.values():
        arm.close()
    if args.current == "worktree":
        shutil.rmtree(cur_tree)
    print(json.dumps(summary, indent=1))
    doc = json.loads(Path(args.out).read_text())
    for f in doc["failures"]:
        print(f"FAILED (a false verdict): {f['task']} [{f['arm']}] {f['error_kind']}: "
              f"{f['error_msg']}")
    print(f"wrote {args.out}")
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
