"""Merge one suite_gpu.py run into the suite record, task by task, and print the README table.

    python scripts/bench/suite_merge.py RUN.json --tag C --commit 6732b2e [--note "..."]
                                        [--into scripts/bench/results/suite_h200.json]

A device call runs part of the suite (the H200 budget is 30 min a session), so the record holds the
latest row of every task with the run that produced it (`run` per task, `runs` for the runs).
Totals, `by_category` and `not_run` are recomputed from the rows.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def suite_ids() -> dict[str, str]:
    """task id -> category for every task in tasks/ (the suite loader's view)."""
    sys.path.insert(0, str(ROOT))
    from kbx_ray.suites.builtin import load_suite

    return {t.task_id: t.category for t in load_suite()}


def _faster(r: dict) -> bool:
    return bool(r["exec_ok"] and r.get("speedup") and r["speedup"] > 1)


def merge(base: dict, run: dict, tag: str, commit: str, note: str, ids: dict[str, str]) -> dict:
    if run.get("gpu") and base.get("gpu") and run["gpu"] != base["gpu"]:
        raise SystemExit(f"the run is on {run['gpu']!r} but the record is for {base['gpu']!r}")
    rows = {r["task_id"]: r for r in base.get("tasks", [])}
    for r in run.get("tasks", []):
        rows[r["task_id"]] = dict(r, run=tag)
    rows = {k: v for k, v in rows.items() if k in ids}  # tasks renamed or removed since
    doc = {k: v for k, v in base.items() if k != "tasks"}
    for k in ("gpu", "pool", "torch", "triton", "cuda", "python", "timing"):
        doc[k] = run.get(k, doc.get(k))
    doc.setdefault("runs", {})[tag] = {"commit": commit, "jobs": run.get("jobs"),
                                       "wall_s": run.get("wall_s"),
                                       "n_tasks": len(run.get("tasks", [])), "note": note}
    ordered = sorted(rows.values(), key=lambda r: r["task_id"])
    cats: dict[str, dict[str, int]] = {}
    for r in ordered:
        c = cats.setdefault(ids[r["task_id"]], {"run": 0, "exec_ok": 0, "faster_than_eager": 0})
        c["run"] += 1
        c["exec_ok"] += bool(r["exec_ok"])
        c["faster_than_eager"] += _faster(r)
    doc.update(n_tasks_suite=len(ids), n_tasks=len(ordered),
               n_exec_ok=sum(bool(r["exec_ok"]) for r in ordered),
               n_faster_than_eager=sum(_faster(r) for r in ordered),
               not_run=sorted(set(ids) - set(rows)), by_category=dict(sorted(cats.items())),
               tasks=ordered)
    return doc


def table(doc: dict) -> str:
    lines = ["| category | run | correct | faster than eager |", "| --- | --- | --- | --- |"]
    lines += [f"| {k} | {v['run']} | {v['exec_ok']} | {v['faster_than_eager']} |"
              for k, v in doc["by_category"].items()]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--into", default=str(ROOT / "scripts/bench/results/suite_h200.json"))
    args = ap.parse_args()
    into = Path(args.into)
    base = json.loads(into.read_text()) if into.exists() else {}
    doc = merge(base, json.loads(Path(args.run).read_text()), args.tag, args.commit, args.note,
                suite_ids())
    into.write_text(json.dumps(doc, indent=1))
    print(f"{doc['n_exec_ok']}/{doc['n_tasks']} correct ({doc['n_tasks_suite']} in the suite), "
          f"{doc['n_faster_than_eager']} faster than eager; not run: {doc['not_run']}")
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
