"""Result dirs -> one evaluations DataFrame, and the two views the report takes of it.
More: kbx_ray/report/README.md, `load.py`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from kbx_ray.sinks import read_table

logger = logging.getLogger(__name__)

VARIANT_KEYS = ("sweep_id", "model", "method")  # one line in a figure, one row in a table
_LABELS = ("sweep_id", "model", "method", "category", "hardware", "task_id", "candidate_id")


class ReportError(ValueError):
    """A report input the user can fix (a missing or empty results dir); the message is one line."""


@dataclass(frozen=True)
class SweepSource:
    sweep_id: str   # the label used in tables and figures
    path: Path      # results/<sweep_id>
    rows: int       # evaluation rows read


def find_sweep_dirs(result_dirs: Iterable[Path]) -> list[Path]:
    """Each dir is a sweep dir (it holds evaluations/) or a parent of sweep dirs; order is kept."""
    found: list[Path] = []
    for d in map(Path, result_dirs):
        if not d.is_dir():
            raise ReportError(f"results dir {d} does not exist; pass results/<sweep_id> or the "
                              "results/ dir that holds the sweeps")
        sweeps = [d] if (d / "evaluations").is_dir() else sorted(
            c for c in d.iterdir() if (c / "evaluations").is_dir())
        if not sweeps:
            raise ReportError(f"no sweep results under {d}: expected {d}/evaluations/ or "
                              f"{d}/<sweep_id>/evaluations/; run a sweep first or pass its dir")
        found += [s for s in sweeps if s.resolve() not in {f.resolve() for f in found}]
    return found


def load_evaluations(result_dirs: Iterable[Path]) -> tuple[pd.DataFrame, list[SweepSource]]:
    """Every evaluation row of every sweep found, normalised (see `normalise`)."""
    frames: list[pd.DataFrame] = []
    sources: list[SweepSource] = []
    for sweep_dir in find_sweep_dirs(result_dirs):
        df = read_table(sweep_dir, "evaluations")
        label = _unique_label(df, sweep_dir, {s.sweep_id for s in sources})
        df["sweep_id"] = label
        sources.append(SweepSource(label, sweep_dir, len(df)))
        if len(df):
            frames.append(df)
    if not frames:
        logger.warning("no evaluation rows in %s; the report will be empty",
                       ", ".join(str(s.path) for s in sources))
        frames = [read_table(sources[0].path, "evaluations")]
    df = latest_task_versions(normalise(pd.concat(frames, ignore_index=True)))
    return df.assign(variant=variant_labels(df)), sources


def latest_task_versions(df: pd.DataFrame) -> pd.DataFrame:
    """A task edited between a sweep's runs has rows under two `task_hash`es, i.e. two sets of
    cells for one task: keep the version evaluated last, so no task counts twice."""
    if "task_hash" not in df.columns or not len(df):
        return df
    last = df.groupby(["sweep_id", "task_id", "task_hash"], dropna=False)["finished_at"].max()
    keep = last.reset_index().sort_values("finished_at").groupby(
        ["sweep_id", "task_id"], dropna=False).tail(1)
    kept = df.merge(keep[["sweep_id", "task_id", "task_hash"]], how="inner")
    if len(kept) < len(df):
        stale = df.merge(keep[["sweep_id", "task_id", "task_hash"]], how="left", indicator=True)
        tasks = sorted(stale.loc[stale["_merge"] == "left_only", "task_id"].unique())
        logger.warning("%d rows of %d task(s) evaluated under an earlier version of the task are "
                       "left out (%s): the report reads each task's last version",
                       len(df) - len(kept), len(tasks), ", ".join(tasks[:5]))
    return kept


def _unique_label(df: pd.DataFrame, sweep_dir: Path, taken: set[str]) -> str:
    """The sweep's own id, or its dir name; suffixed by the parent dir when two dirs share it."""
    ids = df["sweep_id"].dropna().unique()
    label = str(ids[0]) if len(ids) == 1 else sweep_dir.name
    return label if label not in taken else f"{label}@{sweep_dir.parent.name}"


def normalise(df: pd.DataFrame) -> pd.DataFrame:
    """Plain types, with the nulls resolved the way the study reads them.

    A null call_ok/exec_ok is a failure, a null `final` is final (a one-row method need not set
    it), a null round is round 0, a null label is "unknown".
    """
    df = df.copy()
    for col in ("call_ok", "exec_ok"):
        df[col] = df[col].fillna(False).astype(bool)
    df["final"] = df["final"].fillna(True).astype(bool)
    df["round"] = df["round"].fillna(0).astype(int)
    for col in ("speedup", "sol_fraction"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    for col in _LABELS:
        df[col] = df[col].astype(object).where(df[col].notna(), "unknown").astype(str)
    missing = df["cell_id"].isna()
    df.loc[missing, "cell_id"] = "row" + df.index[missing].astype(str)
    df["cell_id"] = df["cell_id"].astype(str)
    return df


def final_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["final"]]


def state_after_k(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """One row per cell: the answer a run with rounds=k would have given (round 0 is the first
    attempt), with its sweep_id.

    The rule is records/ablation.py's, so the report and the methods cannot disagree: methods mark
    their best attempt `final` (methods/base.py:select_best: correct, then faster, then callable,
    ties to the earliest round), so the state after k rounds is the best of the cell's rows with
    round <= k on its primary pool, not the latest. It is applied per sweep, because cell ids
    repeat across sweeps of the same grid.
    """
    from kbx_ray.records.ablation import STATE_COLUMNS, rounds_state

    frames = [rounds_state(g, max_rounds=k).assign(sweep_id=sweep)
              for sweep, g in df.groupby("sweep_id", sort=True)]
    if not frames:
        return pd.DataFrame(columns=["sweep_id", *STATE_COLUMNS])
    out = pd.concat(frames, ignore_index=True)
    return out[out["k"] == k].reset_index(drop=True)


def variant_labels(df: pd.DataFrame) -> pd.Series:
    """The method, plus the model and the sweep where the data hold more than one of them.

    Computed once on all rows (the `variant` column), so that a subset keeps the same labels.
    """
    if not len(df):
        return pd.Series([], index=df.index, dtype=object)
    parts = [k for k in VARIANT_KEYS if k == "method" or df[k].nunique() > 1]
    return df[parts].astype(str).agg(" / ".join, axis=1)


__all__ = ["VARIANT_KEYS", "ReportError", "SweepSource",
           "final_rows", "find_sweep_dirs", "load_evaluations", "normalise", "state_after_k",
           "variant_labels"]
