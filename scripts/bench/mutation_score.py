"""Mutation score of the suite: every task's own solution, mutated, judged by the CPU evaluator.

    python scripts/bench/mutation_score.py [--per-operator 2] [--jobs 2] [--include math,relu]
                                           [--merge | --summarize-only]
                                           [--out scripts/bench/results/mutation_score.json]

(the committed results use --per-operator 1: pass it to reproduce or --merge into them)

First each unmutated solution is judged (a rejection is a false positive: the harness or the task
is wrong); then every mutant of it (kbx_ray/mutation/). A mutant is killed when it ends
exec_ok=False. A mutant whose statement the solution's own small cases never execute (a branch for
shapes no case has) cannot be killed by any harness: it is counted as not covered and left out of
the kill rate, which is killed / (covered - equivalent). Prints the kill rate per category and per mutation
operator, lists the surviving covered mutants for review (each an equivalent mutant, or a weak case
or tolerance), and writes the figures as JSON with the hardware named. Runs on the Triton
interpreter: small cases only.

Equivalent mutants (no input the task allows can tell them apart from the solution, e.g. a
`.contiguous()` dropped on an argument the contract guarantees contiguous) are listed, each with a
one-line reason, in results/equivalent_mutants.json, matched on (task, operator, line,
description). A listed mutant that survives is reported under `equivalent` and left out of the kill
rate; one that is killed is not equivalent after all and counts as killed (`equivalent_killed`:
fix the list). `--merge` re-scores only the included tasks and replaces their mutants in the
existing JSON (`partial_rescore` records which tasks when); a full run drops that key.
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

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator  # noqa: E402
from kbx_ray.prompting.extract import candidate_id  # noqa: E402
from kbx_ray.mutation import OPERATORS, Mutant, mutants_for  # noqa: E402
from kbx_ray.suites.builtin import load_suite  # noqa: E402
from kbx_ray.suites.task_import import load_module  # noqa: E402
from kbx_ray.types import Candidate, Task  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "mutation_score.json"
EQUIVALENT = Path(__file__).resolve().parent / "results" / "equivalent_mutants.json"
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
    ap.add_argument("--merge", action="store_true",
                    help="replace only the included tasks' mutants in the existing --out JSON")
    ap.add_argument("--summarize-only", action="store_true",
                    help="recompute the figures of the existing --out JSON (after editing the "
                         "equivalent list) without judging anything")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if args.summarize_only:
        old = json.loads(Path(args.out).read_text())
        report = summarize(old["mutant_records"], old["false_positive_tasks"], old["task_ids"],
                           old["per_operator_sites"], old["wall_s"])
        report.update({k: old[k] for k in ("hardware", "partial_rescore") if k in old})
        Path(args.out).write_text(dump(report))
        return print_report(report)
    if args.merge and json.loads(Path(args.out).read_text())["per_operator_sites"] != args.per_operator:
        sys.exit(f"{args.out} was scored with another --per-operator: merge with the same value")
    t0 = time.time()
    tasks = load_suite(include=[s for s in args.include.split(",") if s] or None)
    tasks = [t for t in tasks if t.solution_path]
    with ThreadPoolExecutor(args.jobs) as threads:
        base = dict(zip([t.task_id for t in tasks], threads.map(
            lambda t: judge(t, Path(t.solution_path).read_text()), tasks)))
        rejected = {tid: kind for tid, (ok, kind) in base.items() if not ok}
        print(f"{len(tasks)} solutions judged, {len(rejected)} rejected (false positives): "
              f"{rejected}", flush=True)
        scored = [t for t in tasks if t.task_id not in rejected]
        jobs = [(t, m) for t in scored for m in
                mutants_for(Path(t.solution_path).read_text(), t.task_id, args.per_operator)]
        print(f"{len(jobs)} mutants of {len(scored)} tasks", flush=True)
        coverage = {t.task_id: covered_lines(t) for t in scored}  # the interpreter is not thread-safe
        verdicts = list(threads.map(lambda job: judge(job[0], job[1].code), jobs))
    for ev in _all:
        ev.close()
    records = [[t.task_id, t.category, m.operator, m.line, is_covered(m, coverage[t.task_id]),
                None if ok else kind, m.description] for (t, m), (ok, kind) in zip(jobs, verdicts)]
    ids = sorted(t.task_id for t in tasks)
    wall = time.time() - t0
    if args.merge:
        records, rejected, ids, wall = merged(Path(args.out), records, rejected, ids, wall)
    report = summarize(records, rejected, ids, args.per_operator, wall)
    if args.merge:
        old = json.loads(Path(args.out).read_text()).get("partial_rescore", [])
        report["partial_rescore"] = [*old, {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                            "tasks": sorted(t.task_id for t in tasks)}]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(dump(report))
    print_report(report)


def merged(path: Path, records: list, rejected: dict, ids: list[str],
           wall: float) -> tuple[list, dict, list[str], float]:
    """The existing run's records with the re-scored tasks' records replaced."""
    old = json.loads(path.read_text())
    if "mutant_records" not in old:
        sys.exit(f"{path} has no mutant_records (written before --merge existed): run in full once")
    fresh = set(ids)
    keep = [r for r in old["mutant_records"] if r[0] not in fresh]
    fps = {t: k for t, k in old["false_positive_tasks"].items() if t not in fresh}
    return (keep + records, {**fps, **rejected}, sorted(set(old["task_ids"]) | fresh),
            old["wall_s"] + wall)


def load_equivalent() -> dict[tuple, str]:
    """(task_id, operator, line, description) -> reason, from the reviewed list."""
    if not EQUIVALENT.exists():
        return {}
    return {(e["task_id"], e["operator"], e["line"], e["description"]): e["reason"]
            for e in json.loads(EQUIVALENT.read_text())}


def summarize(records: list, rejected: dict[str, str], ids: list[str], per_operator: int,
              wall: float) -> dict:
    import torch
    import triton

    equivalent = load_equivalent()
    by_cat: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    by_op: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    kinds: collections.Counter = collections.Counter()
    uncovered: collections.Counter = collections.Counter()
    survivors, equiv, equiv_killed = [], [], []
    for task_id, category, op, line, cov, kind, desc in records:
        entry = {"task_id": task_id, "operator": op, "line": line, "description": desc}
        reason = equivalent.get((task_id, op, line, desc))
        if not cov:
            uncovered[op] += 1
            continue
        if reason is not None and kind is None:
            equiv.append({**entry, "reason": reason})
            continue
        if reason is not None:
            equiv_killed.append(entry)
        for table, key in ((by_cat, category), (by_op, op)):
            table[key][0] += 0 if kind is None else 1
            table[key][1] += 1
        if kind is None:
            survivors.append(entry)
        else:
            kinds[kind] += 1
    n_cov = sum(1 for r in records if r[4])
    killed = sum(1 for r in records if r[4] and r[5] is not None)
    return {
        "hardware": hardware(), "torch": torch.__version__, "triton": triton.__version__,
        "per_operator_sites": per_operator, "wall_s": round(wall, 1),
        "tasks": len(ids), "mutants": len(records), "covered": n_cov, "killed": killed,
        "kill_rate": rate(killed, n_cov - len(equiv)),
        "kill_rate_counting_equivalent": rate(killed, n_cov),
        "kill_rate_all_mutants": rate(killed + sum(1 for r in records if not r[4] and r[5]),
                                      len(records)),
        "not_covered": dict(uncovered.most_common()),
        "false_positives": len(rejected), "false_positive_tasks": rejected,
        "per_category": {c: {"mutants": n, "killed": k, "kill_rate": rate(k, n)}
                         for c, (k, n) in sorted(by_cat.items())},
        "per_operator": {o: {"mutants": n, "killed": k, "kill_rate": rate(k, n)}
                         for o in OPERATORS if o in by_op for k, n in [by_op[o]]},
        "killed_by": dict(kinds.most_common()),
        "survivors": survivors,
        "equivalent": equiv,
        "equivalent_killed": equiv_killed,
        "task_ids": ids,
        "mutant_records": records,
    }


def dump(report: dict) -> str:
    """Indented JSON with one line per mutant record (task, category, operator, line, covered,
    killed_by or null, description)."""
    rows = report.pop("mutant_records")
    text = json.dumps(report, indent=2)
    body = ",\n".join("    " + json.dumps(r) for r in rows)
    return text[:-2] + ',\n  "mutant_records": [\n' + body + "\n  ]\n}\n"


def print_report(r: dict) -> None:
    n = r["covered"] - len(r["equivalent"])
    print(f"\nkill rate {r['kill_rate']:.1%} ({r['killed']}/{n} covered non-equivalent mutants; "
          f"{r['kill_rate_all_mutants']:.1%} of all {r['mutants']}), false positives "
          f"{r['false_positives']}/{r['tasks']}   [{r['hardware']}, {r['wall_s']:.0f} s]")
    print(f"not covered by any small case: {r['not_covered']}")
    for title, table in (("category", r["per_category"]), ("operator", r["per_operator"])):
        print(f"\n{title:<20} {'mutants':>8} {'killed':>8} {'rate':>7}")
        for name, row in table.items():
            print(f"{name:<20} {row['mutants']:>8} {row['killed']:>8} {row['kill_rate']:>7.1%}")
    print(f"\n{len(r['equivalent'])} reviewed equivalent mutants left out of the kill rate; "
          f"{len(r['equivalent_killed'])} listed as equivalent but killed: {r['equivalent_killed']}")
    print(f"\n{len(r['survivors'])} survivors:")
    for s in r["survivors"]:
        print(f"  {s['task_id']:<40} {s['operator']:<20} line {s['line']:<4} {s['description']}")


if __name__ == "__main__":
    main()
