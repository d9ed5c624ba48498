"""Evaluations + generations -> the results browser's rows: each cell's verdict and its rounds.

One row per final kernel (cell x GPU pool), with the verdict, the message a user reads first, the
speedup and SOL, and the number of rounds behind it; `rounds` gives every evaluation of one cell,
each with the kernel text the model wrote for it. The kernel text is the last fenced Python block
of the completion that holds a Triton kernel (else the last block, else the whole answer): the
code the harness judged, without re-reading the task to find its entry point.
"""
from __future__ import annotations

import logging
import math

import pandas as pd

from kbx_ray.prompting.extract import python_blocks
from kbx_ray.report.load import SweepSource, final_rows
from kbx_ray.report.stats import with_verdicts
from kbx_ray.sinks import read_rows

logger = logging.getLogger(__name__)

MAX_CELLS = 2000  # rows in the browser; a larger sweep lists the failures first, then the rest
COLUMNS = ("anchor", "sweep_id", "task_id", "category", "method", "model", "sample", "hardware",
           "verdict", "message", "speedup", "sol_fraction", "rounds")
KernelTexts = dict[tuple[str, str], str]  # (sweep_id, candidate_id) -> kernel text


def kernel_text(completion: str) -> str:
    blocks = python_blocks(completion or "")
    triton = [b for b in blocks if "triton" in b]
    return (triton or blocks or [completion or ""])[-1].strip() + "\n"


def kernel_texts(sources: list[SweepSource]) -> KernelTexts:
    """Each evaluated candidate's kernel text, from the sweeps' generations (prompts not read)."""
    texts: KernelTexts = {}
    for s in sources:
        for g in read_rows(s.path, "generations", skip=("prompt",)):
            if g.get("candidate_id"):
                texts[(s.sweep_id, g["candidate_id"])] = kernel_text(g.get("completion") or "")
    return texts


def message(row: dict) -> str:
    """What a reader needs first: the error, or for a correct kernel why it was not timed."""
    if row["verdict"] == "correct":
        skipped = _text(row.get("timing_skipped"))
        return f"correct; timing skipped: {skipped}" if skipped else "correct"
    return _text(row.get("error_msg")) or f"failed at stage {_text(row.get('stage')) or 'unknown'}"


def cell_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per final kernel, COLUMNS; failures first when there are more than MAX_CELLS."""
    rows = with_verdicts(final_rows(df))
    if rows.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    counts = df.groupby(["sweep_id", "cell_id"])["round"].nunique().rename("rounds")
    rows = rows.join(counts, on=["sweep_id", "cell_id"])
    rows = rows.sort_values(["sweep_id", "task_id", "method", "model", "sample", "hardware"])
    if len(rows) > MAX_CELLS:
        rows = rows.assign(_ok=rows["verdict"] == "correct").sort_values("_ok", kind="stable")
        logger.warning("the results browser lists %d of %d final kernels (failures first)",
                       MAX_CELLS, len(rows))
        rows = rows.head(MAX_CELLS)
    records = rows.to_dict("records")
    out = pd.DataFrame([{**{c: r.get(c) for c in COLUMNS}, "message": message(r)}
                        for r in records], columns=list(COLUMNS))
    anchors = {key: f"cell-{i}" for i, key in enumerate(dict.fromkeys(
        zip(out["sweep_id"], rows["cell_id"])))}
    out["anchor"] = [anchors[k] for k in zip(out["sweep_id"], rows["cell_id"])]
    out["cell_id"] = list(rows["cell_id"])
    return out


def rounds(df: pd.DataFrame, sweep_id: str, cell_id: str, texts: KernelTexts) -> list[dict]:
    """Every evaluation of one cell, by round, branch and pool, with its verdict and kernel."""
    rows = with_verdicts(df[(df["sweep_id"] == sweep_id) & (df["cell_id"] == cell_id)])
    rows = rows.sort_values(["round", "branch", "hardware"], na_position="first")
    out = []
    for r in rows.to_dict("records"):
        out.append({"round": int(r["round"]), "hardware": r["hardware"], "verdict": r["verdict"],
                    "message": message(r), "speedup": _number(r.get("speedup")),
                    "final": bool(r["final"]), "stop_reason": _text(r.get("stop_reason")),
                    "kernel": texts.get((sweep_id, str(r["candidate_id"])))})
    return out


def _text(v: object) -> str:
    """A text column's value; "" for a null (None, or NaN where frames of several sweeps met)."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


__all__ = ["COLUMNS", "MAX_CELLS", "cell_table", "kernel_text", "kernel_texts", "message",
           "rounds"]
