"""One R-round run -> the state and the metrics after k rounds, for every k <= R.
More: kbx_ray/records/README.md, `ablation.py`.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd

from kbx_ray.methods.base import rank
from kbx_ray.records.metrics import Tally

STATE_COLUMNS = ("cell_id", "task_id", "category", "method", "model", "sample", "hardware", "k",
                 "rounds_used", "round", "branch", "candidate_id", "call_ok", "exec_ok",
                 "error_kind", "speedup", "sol_fraction")
GROUP_BY = ("method", "model", "hardware")


def _bool(v: Any) -> bool:
    return False if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else bool(v)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v: Any) -> int:
    return 0 if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else int(v)


def _clean(row: dict) -> dict:
    row = dict(row)
    row["call_ok"], row["exec_ok"] = _bool(row.get("call_ok")), _bool(row.get("exec_ok"))
    row["speedup"], row["sol_fraction"] = _num(row.get("speedup")), _num(row.get("sol_fraction"))
    row["round"], row["branch"] = _int(row.get("round")), _int(row.get("branch"))
    return row


def _key(r: dict) -> tuple:
    return (rank(r["call_ok"], r["exec_ok"], r["speedup"], r.get("stage")), -r["round"], -r["branch"])


def primary_rows(rows: list[dict]) -> list[dict]:
    """A cell's rows on the pool that judged its rounds (the one holding most of its rows)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("hardware") or ""] = counts.get(r.get("hardware") or "", 0) + 1
    pool = max(counts, key=lambda h: (counts[h], h == (rows[0].get("hardware") or "")))
    return [r for r in rows if (r.get("hardware") or "") == pool]


def rounds_state(evaluations: pd.DataFrame, max_rounds: int | None = None) -> pd.DataFrame:
    """One row per (cell, k) for k = 0..max_rounds (default: the largest round recorded): the
    answer a run with rounds=k would have given. A cell that stopped at round s keeps its state
    for every k > s (`rounds_used` = min(k, s)); one that ran out of its own budget
    (`stop_reason` max_rounds, a sweep's smaller rounds value) says nothing past it."""
    by_cell: dict[str, list[dict]] = {}
    for row in evaluations.to_dict("records"):
        by_cell.setdefault(str(row["cell_id"]), []).append(_clean(row))
    if not by_cell:
        return pd.DataFrame(columns=list(STATE_COLUMNS))
    top = max(r["round"] for rows in by_cell.values() for r in rows)
    top = top if max_rounds is None else max_rounds
    out = []
    for rows in by_cell.values():
        rows = primary_rows(rows)
        last = max(r["round"] for r in rows)
        capped = any(r["round"] == last and r.get("stop_reason") == "max_rounds" for r in rows)
        for k in range(min(top, last) + 1 if capped else top + 1):
            best = max((r for r in rows if r["round"] <= k), key=_key, default=None)
            if best is None:  # no row this early (e.g. round 0 missing): no state at k
                continue
            out.append({**{c: best.get(c) for c in STATE_COLUMNS}, "k": k,
                        "rounds_used": min(k, last)})
    return pd.DataFrame(out, columns=list(STATE_COLUMNS))


def rounds_curve(evaluations: pd.DataFrame, max_rounds: int | None = None,
                 by: Iterable[str] = GROUP_BY) -> pd.DataFrame:
    """Call rate, exec rate, fast_p, geomean speedup and SOL fraction after k rounds, per group
    (method, model, hardware by default) and k: the whole ablation curve from one run."""
    state = rounds_state(evaluations, max_rounds)
    keys = [*by, "k"]
    out = []
    for key, g in state.groupby(keys, sort=True, dropna=False):
        tally = Tally()
        for row in g.to_dict("records"):
            tally.add(row)
        out.append({**dict(zip(keys, key)), **tally.metrics()})
    return pd.DataFrame(out)
