"""Final rows -> verdict counts by error kind x category, and rates with their uncertainty.

A rate over 12 cells is not a rate over 1,200: each is given with its 95% Wilson score interval
(right at 0% and 100%, where the normal approximation collapses to a point). pass@k is the unbiased
estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k) for a task with n samples of which c are
correct, averaged over the tasks with at least k samples; a sweep of one sample per task has pass@1
only. Both count a kernel as correct the way the live metrics do (metrics.passed).
"""
from __future__ import annotations

import math

import pandas as pd

from kbx_ray.records.metrics import passed
from kbx_ray.report.load import VARIANT_KEYS, final_rows

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval
PASS_KS = (1, 5, 10, 100)
BY = (*VARIANT_KEYS, "hardware")


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of successes / n; (nan, nan) when n is 0."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k samples drawn from n (c correct) is correct."""
    if k > n:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def verdict(row: dict) -> str:
    """One word for a row's outcome: `correct`, else its error kind (`failed` when none is set)."""
    if passed(row):
        return "correct"
    return str(row.get("error_kind") or "") or "failed"


def with_verdicts(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(verdict=[verdict(r) for r in df.to_dict("records")])


def verdict_table(df: pd.DataFrame) -> pd.DataFrame:
    """Final kernels per sweep and verdict (rows) and category (columns), with a total column."""
    rows = with_verdicts(final_rows(df))
    if rows.empty:
        return pd.DataFrame(columns=["sweep_id", "verdict", "all"])
    counts = rows.pivot_table(index=["sweep_id", "verdict"], columns="category", values="cell_id",
                              aggfunc="count", fill_value=0)
    counts["all"] = counts.sum(axis=1)
    counts = counts.reset_index()
    counts.columns.name = None
    # correct first, then the most frequent failures
    counts["_order"] = (counts["verdict"] != "correct").astype(int)
    counts = counts.sort_values(["sweep_id", "_order", "all", "verdict"],
                                ascending=[True, True, False, True])
    return counts.drop(columns="_order").reset_index(drop=True)


def _interval(successes: int, n: int) -> str:
    lo, hi = wilson(successes, n)
    return "–" if math.isnan(lo) else f"{lo:.0%}–{hi:.0%}"


def rate_intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Per sweep, model, method and pool: call and exec rates with 95% intervals, and pass@k."""
    rows = final_rows(df)
    ok = [passed(r) for r in rows.to_dict("records")]
    rows = rows.assign(_ok=ok)
    out = []
    for key, g in rows.groupby(list(BY), sort=True):
        per_task = g.groupby("task_id")["_ok"].agg(["size", "sum"])
        n, calls, correct = len(g), int(g["call_ok"].sum()), int(g["_ok"].sum())
        entry = {**dict(zip(BY, key)), "tasks": len(per_task), "cells": n,
                 "call_rate": calls / n, "call 95% CI": _interval(calls, n),
                 "exec_rate": correct / n, "exec 95% CI": _interval(correct, n)}
        for k in PASS_KS:
            if k == 1 or (per_task["size"] >= k).any():
                scores = [pass_at_k(int(s), int(c), k) for s, c in zip(per_task["size"],
                                                                      per_task["sum"])]
                entry[f"pass@{k}"] = pd.Series(scores, dtype=float).mean()
        out.append(entry)
    table = pd.DataFrame(out)
    return table if len(table) else pd.DataFrame(columns=[*BY, "tasks", "cells"])


__all__ = ["PASS_KS", "pass_at_k", "rate_intervals", "verdict", "verdict_table", "wilson",
           "with_verdicts"]
