"""Mutation score of the suite: every task's own solution, mutated, judged by the CPU evaluator.

    python scripts/bench/mutation_score.py [--per-operator 2] [--jobs 2] [--include math,relu]
                                           [--out scripts/bench/results/mutation_score.json]

First each unmutated solution is judged (a rejection is a false positive: the harness or the task
is wrong); then every mutant of it (kbx_ray/llm/mutants.py). A mutant is killed when it ends
exec_ok=False. A mutant whose statement the solution's own small cases never execute (a branch for
shapes no case has) cannot be killed by any harness: it is counted as not covered and left out of
the kill rate, which is killed / covered. Prints the kill rate per category and per mutation
operator, lists the surviving covered mutants for review (each an equivalent mutant, or a weak case
or tolerance), and writes the figures as JSON with the hardware named. Runs on the Triton
interpreter: small cases only.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # coverage runs the solutions here, on the CPU

import argparse  # noqa: E402
import collections  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from kbx_ray.evaluate.evaluator import EvalConfig, Evaluator  # noqa: E402
from kbx_ray.extract import candidate_id  # noqa: E402
from kbx_ray.llm.mutants import OPERATORS, Mutant, mutants_for  # noqa: E402
from kbx_ray.suite import load_module, load_suite  # noqa: E402
from kbx_ray.types import Candidate, Task  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "mutation_score.json"
_local = threading.local()
_all: list[Evaluator] = []


def judge(task: Task, code: str) -> tuple[bool, str]:
    """(passed, error_kind) of `code` for `task`, on this thread's own warm evaluator."""
    ev = getattr(_local, "ev", None)
    if ev is None:
        ev = _local.ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60))
        _all.append(ev)
    cand = Candidate(candidate_id(task.task_id, code), task.task_id, code, task.name)
    res = ev.evaluate(task, cand)
    return res.exec_ok, res.error_kind


def covered_lines(task: Task) -> set[int]:
    """Lines of the solution that its own small cases execute, kernels included (the interpreter
    runs kernel bodies as Python)."""
    path = str(Path(task.solution_path).resolve())
    spec = importlib.util.spec_from_file_location(f"kbx_cov_{task.task_id.replace('/', '_')}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    lines: set[int] = set()

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            lines.add(frame.f_lineno)
        return local

    ref = load_module(task.path)
    sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == path else None)
    try:
        spec.loader.exec_module(mod)
        for case in task.cases:
            if case["small"]:
                args, kwargs = ref.make_inputs(case, 0, "cpu")
                getattr(mod, task.name)(*args, **kwargs)
    finally:
        sys.settrace(None)
    return lines


def is_covered(m: Mutant, lines: set[int]) -> bool:
    return any(n in lines for n in range(m.span[0], m.span[1] + 1))


def hardware() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores (CPU only: Triton interpreter, small cases)"


def rate(killed: int, total: int) -> float | None:
    return round(killed / total, 4) if total else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-operator", type=int, default=2,
                    help="mutation sites per operator per task")
    ap.add_argument("--jobs", type=int, default=1, help="evaluators judging in parallel")
    ap.add_argument("--include", default="", help="comma-separated task ids, categories or globs")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    t0 = time.time()
    tasks = load_suite(include=[s for s in args.include.split(",") if s] or None)
    tasks = [t for t in tasks if t.solution_path]
    with ThreadPoolExecutor(args.jobs) as pool:
        base = dict(zip([t.task_id for t in tasks], pool.map(
            lambda t: judge(t, Path(t.solution_path).read_text()), tasks)))
        rejected = {tid: kind for tid, (ok, kind) in base.items() if not ok}
        print(f"{len(tasks)} solutions judged, {len(rejected)} rejected (false positives): "
              f"{rejected}", flush=True)
        scored = [t for t in tasks if t.task_id not in rejected]
        jobs = [(t, m) for t in scored for m in
                mutants_for(Path(t.solution_path).read_text(), t.task_id, args.per_operator)]
        print(f"{len(jobs)} mutants of {len(scored)} tasks", flush=True)
        coverage = {t.task_id: covered_lines(t) for t in scored}  # the interpreter is not thread-safe
        verdicts = list(pool.map(lambda job: judge(job[0], job[1].code), jobs))
    covered = [is_covered(m, coverage[t.task_id]) for t, m in jobs]
    for ev in _all:
        ev.close()
    report = summarize(tasks, rejected, jobs, verdicts, covered, args, time.time() - t0)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)


def summarize(tasks: list[Task], rejected: dict[str, str], jobs: list[tuple[Task, Mutant]],
              verdicts: list[tuple[bool, str]], covered: list[bool], args: Any,
              wall: float) -> dict:
    import torch
    import triton

    by_cat: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    by_op: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    kinds: collections.Counter = collections.Counter()
    uncovered: collections.Counter = collections.Counter()
    survivors = []
    for (task, m), (ok, kind), cov in zip(jobs, verdicts, covered):
        if not cov:
            uncovered[m.operator] += 1
            continue
        for table, key in ((by_cat, task.category), (by_op, m.operator)):
            table[key][0] += 0 if ok else 1
            table[key][1] += 1
        if ok:
            survivors.append({"task_id": task.task_id, "operator": m.operator, "line": m.line,
                              "description": m.description})
        else:
            kinds[kind] += 1
    killed = sum(1 for (ok, _), cov in zip(verdicts, covered) if cov and not ok)
    n_cov = sum(covered)
    return {
        "hardware": hardware(), "torch": torch.__version__, "triton": triton.__version__,
        "per_operator_sites": args.per_operator, "wall_s": round(wall, 1),
        "tasks": len(tasks), "mutants": len(jobs), "covered": n_cov, "killed": killed,
        "kill_rate": rate(killed, n_cov),
        "kill_rate_all_mutants": rate(sum(1 for ok, _ in verdicts if not ok), len(jobs)),
        "not_covered": dict(uncovered.most_common()),
        "false_positives": len(rejected), "false_positive_tasks": rejected,
        "per_category": {c: {"mutants": n, "killed": k, "kill_rate": rate(k, n)}
                         for c, (k, n) in sorted(by_cat.items())},
        "per_operator": {o: {"mutants": n, "killed": k, "kill_rate": rate(k, n)}
                         for o in OPERATORS if o in by_op for k, n in [by_op[o]]},
        "killed_by": dict(kinds.most_common()),
        "survivors": survivors,
    }


def print_report(r: dict) -> None:
    print(f"\nkill rate {r['kill_rate']:.1%} ({r['killed']}/{r['covered']} covered mutants; "
          f"{r['kill_rate_all_mutants']:.1%} of all {r['mutants']}), false positives "
          f"{r['false_positives']}/{r['tasks']}   [{r['hardware']}, {r['wall_s']:.0f} s]")
    print(f"not covered by any small case: {r['not_covered']}")
    for title, table in (("category", r["per_category"]), ("operator", r["per_operator"])):
        print(f"\n{title:<20} {'mutants':>8} {'killed':>8} {'rate':>7}")
        for name, row in table.items():
            print(f"{name:<20} {row['mutants']:>8} {row['killed']:>8} {row['kill_rate']:>7.1%}")
    print(f"\n{len(r['survivors'])} survivors:")
    for s in r["survivors"]:
        print(f"  {s['task_id']:<40} {s['operator']:<20} line {s['line']:<4} {s['description']}")


if __name__ == "__main__":
    main()
