"""Evaluations -> the study's tables, as DataFrames (render.py formats them, figures.py plots them).
More: kbx_ray/report/README.md, `tables.py`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

from kbx_ray.report.load import VARIANT_KEYS, final_rows
from kbx_ray.records.metrics import FAST_P, Tally, fast_key, geomean

FAST_COLUMNS = tuple(fast_key(p) for p in FAST_P)
RATE_COLUMNS = ("cells", "call_rate", "exec_rate", *FAST_COLUMNS, "geomean_speedup")
SPEEDUP_COLUMNS = ("correct", "timed", "sum_ratio", "mean_task_ratio", "geomean_speedup",
                   "slower_than_eager", "mean_sol_fraction")
ABLATION_COLUMNS = ("cells", "call_rate", "exec_rate", "geomean_speedup")
SPREAD_COLUMNS = ("sweep_id", "task_id", "candidate_id", "pools", "slowest_on", "min_speedup",
                  "fastest_on", "max_speedup", "spread")
COUNT_COLUMNS = frozenset({"cells", "correct", "timed", "pools", "k"})
# a kernel's verdict is a GPU's: rates are per pool (one cell's final kernel on each), never an
# average over GPUs, and the primary pool's row is what the ablation's k = R gives
BY_METHOD = (*VARIANT_KEYS, "hardware")
BY_CATEGORY = ("sweep_id", "category", "hardware")
BY_HARDWARE = BY_METHOD


@dataclass
class Tables:
    by_method: pd.DataFrame     # RATE_COLUMNS per sweep, model, method, hardware
    by_category: pd.DataFrame   # RATE_COLUMNS per sweep, category, hardware
    speedup: pd.DataFrame       # SPEEDUP_COLUMNS per sweep, model, method, hardware
    ablation: pd.DataFrame      # ABLATION_COLUMNS per sweep, model, method, k
    gpu_spread: pd.DataFrame    # SPREAD_COLUMNS, one row per task timed on >= 2 pools


def compute_tables(df: pd.DataFrame) -> Tables:
    return Tables(rate_table(df, BY_METHOD), rate_table(df, BY_CATEGORY),
                  speedup_table(df, BY_HARDWARE), ablation_table(df), gpu_spread_table(df))


def tally(rows: pd.DataFrame) -> dict[str, float]:
    t = Tally()
    for row in rows.to_dict("records"):
        t.add(row)
    return t.metrics()


def per_group(df: pd.DataFrame, by: Sequence[str], fn: Callable[[pd.DataFrame], dict[str, Any]],
              columns: Sequence[str]) -> pd.DataFrame:
    """fn on each group, one row per group, sorted by the keys; missing metrics are NaN."""
    rows = []
    for key, g in df.groupby(list(by), sort=True):
        m = fn(g)
        rows.append({**dict(zip(by, key)), **{c: m.get(c, math.nan) for c in columns}})
    out = pd.DataFrame(rows, columns=[*by, *columns])
    for c in COUNT_COLUMNS.intersection(columns):
        out[c] = out[c].astype(int)
    return out


def rates(rows: pd.DataFrame) -> dict[str, float]:
    """Tally's rates, except that fast_p is unknown (NaN), not 0, when correct kernels exist but
    none was timed (a CPU sweep): "not measured" must not read as "not fast"."""
    m = tally(rows)
    if m["exec_rate"] > 0 and "geomean_speedup" not in m:
        m.update({k: math.nan for k in FAST_COLUMNS})
    return m


def rate_table(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    return per_group(final_rows(df), by, rates, RATE_COLUMNS)


def case_sums(cases: object) -> tuple[float, float] | None:
    """(Σ ref ms, Σ candidate ms) over the timed cases of a row's `cases` JSON; None if none."""
    try:
        items = json.loads(cases) if isinstance(cases, str) else []
    except json.JSONDecodeError:
        return None
    pairs = [(c.get("ref_ms"), c.get("cand_ms")) for c in items if isinstance(c, dict)]
    pairs = [(r, c) for r, c in pairs if _positive(r) and _positive(c)]
    if not pairs:
        return None
    return sum(r for r, _ in pairs), sum(c for _, c in pairs)


def _positive(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def speedup_metrics(rows: pd.DataFrame) -> dict[str, float]:
    correct = rows[rows["exec_ok"]]
    timed = [(str(t), s) for t, s in zip(correct["task_id"], map(case_sums, correct["cases"]))
             if s is not None]
    sums = [s for _, s in timed]
    by_task: dict[str, list[float]] = {}
    for task, (ref, cand) in timed:
        acc = by_task.setdefault(task, [0.0, 0.0])
        acc[0], acc[1] = acc[0] + ref, acc[1] + cand
    speedups = [float(v) for v in correct["speedup"] if _positive(v)]
    sols = [float(v) for v in correct["sol_fraction"] if math.isfinite(v)]
    out: dict[str, float] = {"correct": len(correct), "timed": len(speedups)}
    if sums:
        out["sum_ratio"] = sum(r for r, _ in sums) / sum(c for _, c in sums)
        out["mean_task_ratio"] = sum(r / c for r, c in by_task.values()) / len(by_task)
    if speedups:
        out["geomean_speedup"] = geomean(speedups)
        out["slower_than_eager"] = sum(v < 1 for v in speedups) / len(speedups)
    if sols:
        out["mean_sol_fraction"] = sum(sols) / len(sols)
    return out


def speedup_table(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    return per_group(final_rows(df), by, speedup_metrics, SPEEDUP_COLUMNS)


def ablation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Rates after k = 0..R repair rounds, per variant, R being that variant's last round.

    Over the cells' primary pool (where rounds are judged), so `cells` counts cells, not cell x
    pool rows; the state rule is `load.state_after_k`'s (kbx_ray/records/ablation.py).
    """
    from kbx_ray.records.ablation import rounds_state

    frames = []
    for key, g in df.groupby(list(VARIANT_KEYS), sort=True):  # sweep_id first: ids repeat
        for k, state in rounds_state(g).groupby("k", sort=True):
            m = tally(state)
            frames.append({**dict(zip(VARIANT_KEYS, key)), "k": int(k),
                           **{c: m.get(c, math.nan) for c in ABLATION_COLUMNS}})
    out = pd.DataFrame(frames, columns=[*VARIANT_KEYS, "k", *ABLATION_COLUMNS])
    return out.astype({"k": int, "cells": int})


def timed_correct(df: pd.DataFrame) -> pd.DataFrame:
    """Final rows whose kernel is correct and has a speedup: what the speedup figures show."""
    rows = final_rows(df)
    return rows[rows["exec_ok"] & rows["speedup"].map(_positive).astype(bool)]


def gpu_spread_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per task, the widest max/min speedup of one kernel (one candidate_id) across GPU pools.

    Only the same code on different GPUs is compared; a kernel timed more than once on a pool
    counts with its median there. Sorted widest first.
    """
    keys = ["sweep_id", "task_id", "candidate_id"]
    per_pool = timed_correct(df).groupby([*keys, "hardware"])["speedup"].median().reset_index()
    rows = []
    for key, g in per_pool.groupby(keys, sort=True):
        if len(g) < 2:
            continue
        lo, hi = g.loc[g["speedup"].idxmin()], g.loc[g["speedup"].idxmax()]
        rows.append({**dict(zip(keys, key)), "pools": len(g), "slowest_on": lo["hardware"],
                     "min_speedup": lo["speedup"], "fastest_on": hi["hardware"],
                     "max_speedup": hi["speedup"], "spread": hi["speedup"] / lo["speedup"]})
    out = pd.DataFrame(rows, columns=list(SPREAD_COLUMNS))
    out = out.sort_values(["spread", "sweep_id", "task_id"], ascending=[False, True, True])
    return out.drop_duplicates(["sweep_id", "task_id"]).reset_index(drop=True)
