"""Ready-made W&B charts, logged when a sweep closes: the dashboard without hand-made panels.

- `charts/exec_rate_by_category`: bar chart of final-row exec rate per category;
- `charts/repair_curve`: exec rate after k rounds per method (the ablation from one run);
- `charts/speedup_log2`: histogram of log2 speedup of correct final kernels (0 = eager).
W&B cannot ship a saved workspace offline, so these plus the `metrics/*` series are the dashboard.
"""
from __future__ import annotations

import math
from typing import Any

KEEP = ("cell_id", "task_id", "category", "method", "model", "sample", "hardware", "round",
        "branch", "call_ok", "exec_ok", "speedup", "sol_fraction", "stage", "final", "stop_reason")


def compact(row: dict) -> dict:
    return {k: row.get(k) for k in KEEP}


def final_charts(rows: list[dict]) -> dict[str, Any]:
    import pandas as pd
    import wandb

    from kbx_ray.records.ablation import rounds_curve

    charts: dict[str, Any] = {}
    final = [r for r in rows if r.get("final") is not False]
    cats: dict[str, list[bool]] = {}
    for r in final:
        cats.setdefault(str(r.get("category")), []).append(bool(r.get("exec_ok")))
    bar = wandb.Table(columns=["category", "exec_rate"],
                      data=[[c, sum(v) / len(v)] for c, v in sorted(cats.items())])
    charts["charts/exec_rate_by_category"] = wandb.plot.bar(
        bar, "category", "exec_rate", title="exec rate by category")
    curve = rounds_curve(pd.DataFrame(rows)) if rows else pd.DataFrame()
    if len(curve):
        line = wandb.Table(columns=["k", "exec_rate", "method"],
                           data=[[int(k), rate, name] for k, rate, name in curve_lines(curve)])
        charts["charts/repair_curve"] = wandb.plot.line(
            line, "k", "exec_rate", stroke="method", title="exec rate after k rounds")
    logs = [[math.log2(float(r["speedup"]))] for r in final
            if r.get("exec_ok") and r.get("speedup")]
    hist = wandb.Table(columns=["log2_speedup"], data=logs)
    charts["charts/speedup_log2"] = wandb.plot.histogram(
        hist, "log2_speedup", title="log2 speedup over eager (correct kernels)")
    return charts


def curve_lines(curve: Any) -> list[tuple[int, float, str]]:
    """(k, exec rate, line label) per point of `rounds_curve`: one line per method, model and
    pool, the label naming a model or a pool only where the sweep has several (a line that
    mixed two models' points would zig-zag between them)."""
    rows = curve.to_dict("records")
    parts = ["method"] + [d for d in ("model", "hardware") if len({r[d] for r in rows}) > 1]
    return [(int(r["k"]), float(r["exec_rate"]), " / ".join(str(r[d]) for d in parts))
            for r in rows]
