"""Two suite_gpu.py runs side by side: their verdicts task by task, and their per-stage cost.

    python scripts/bench/compare_runs.py BASE.json NEW.json [--out table.md]

Over the tasks both ran: every verdict (exec_ok, error_kind) compared, the speedups' ratio, and
the stage seconds (`EvalResult.stage_s`) summed. Exit 1 when a verdict differs, unless the base's
was a platform failure (`infra_error`, or a message of the replay process running out of memory)
that the new run no longer has: those are listed as mended, not as differences.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

STAGES = ("correctness", "timing", "load", "mem_wait", "mem_wait_free", "lock_wait",
          "lock_wait_excl", "lock_drain", "exclusive", "worker_run", "replay", "judge", "t_loop",
          "t_ref", "t_replay", "t_checks", "t_recheck", "t_samples", "replay_warm",
          "replay_compiles", "tw_inputs", "tw_bench", "tw_fresh", "tw_digest", "tw_encode",
          "w_call", "w_trace", "trace_missed", "seeded", "seed_s", "w_compiled")
# each run's own figures (suite_gpu.py), over all its tasks: not only the common ones
RUN = ("n_tasks", "n_oom_shared_gpu", "gpu_idle_share", "gpu_mem_used_max_gib",
       "gpu_mem_full_share", "cpu_busy_mean_pct")


def verdict(row: dict) -> str:
    return "pass" if row["exec_ok"] else row["error_kind"] or "fail"


def _platform(row: dict) -> bool:
    msg = row.get("error_msg", "")
    return row["error_kind"] == "infra_error" or "out of memory" in msg.lower()


def compare(base: dict, new: dict) -> dict:
    b = {r["task_id"]: r for r in base["tasks"]}
    n = {r["task_id"]: r for r in new["tasks"]}
    common = sorted(set(b) & set(n))
    differ, mended, ratios = [], [], []
    for t in common:
        vb, vn = verdict(b[t]), verdict(n[t])
        if vb != vn:
            (mended if vn == "pass" and _platform(b[t]) else differ).append((t, vb, vn))
        sb, sn = b[t].get("speedup"), n[t].get("speedup")
        if sb and sn:
            ratios.append(sn / sb)
    held_up = sorted({k for r in (b, n) for t in common for k in r[t]["stage_s"]
                      if k.startswith("hu_")})  # GpuLock.held_up, by step
    stages = {s: (round(sum(b[t]["stage_s"].get(s, 0.0) for t in common), 1),
                  round(sum(n[t]["stage_s"].get(s, 0.0) for t in common), 1))
              for s in STAGES + tuple(held_up)}
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    return {"tasks": len(common), "differ": differ, "mended": mended, "stages": stages,
            "speedup_ratio_geomean": geo,
            "speedup_ratio_range": (min(ratios), max(ratios)) if ratios else None,
            "eval_wall": (round(sum(b[t]["eval_wall_s"] for t in common), 1),
                          round(sum(n[t]["eval_wall_s"] for t in common), 1)),
            "wall": (base.get("wall_s"), new.get("wall_s")),
            "run": {k: (base.get(k), new.get(k)) for k in RUN if k in base or k in new}}


def table(c: dict, base_name: str, new_name: str) -> str:
    rows = [f"| | {base_name} | {new_name} | new/base |", "| --- | --- | --- | --- |"]
    pairs = [("run wall", c["wall"]), ("eval wall, summed", c["eval_wall"])] + \
        [(s, v) for s, v in c["stages"].items()]
    pairs += [(f"{k} (whole run)", v) for k, v in c.get("run", {}).items()]
    for name, (x, y) in pairs:
        ratio = f"{y / x:.2f}" if x and y is not None else "-"
        rows.append(f"| {name} | {x} | {y} | {ratio} |")
    lines = [f"{c['tasks']} tasks in both runs.", ""] + rows + [""]
    lines.append(f"Verdicts that differ: {len(c['differ'])}" + "".join(
        f"\n- {t}: {a} -> {b}" for t, a, b in c["differ"]))
    lines.append(f"Platform failures of the base that now pass: {len(c['mended'])}" + "".join(
        f"\n- {t}: {a} -> {b}" for t, a, b in c["mended"]))
    if c["speedup_ratio_geomean"]:
        lo, hi = c["speedup_ratio_range"]
        lines.append(f"Speedups, new/base: geometric mean {c['speedup_ratio_geomean']:.3f} "
                     f"(range {lo:.2f}-{hi:.2f})")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    c = compare(json.loads(Path(args.base).read_text()), json.loads(Path(args.new).read_text()))
    text = table(c, Path(args.base).stem, Path(args.new).stem)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 1 if c["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
