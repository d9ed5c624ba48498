"""Evaluations of replayed kernels -> our verdicts next to the peer harness's, per category.

A sweep that re-judges another harness's kernels (`model=replay` over KernelBench-X's JSONL or a
folder of files, llm/replay_files.py) records the peer's verdict where the input carried one
(`peer_verdict`), and every record says where our verdict is stricter on purpose
(`stricter_reason`, suites/peer.py). These tables put them side by side: per category, our exec
rate, the peer's pass rate and how often the two agree; then each disagreement with its cause.
"""
from __future__ import annotations

import pandas as pd

from kbx_ray.report.load import final_rows

PEER_COLUMNS = ("kernels", "exec_rate", "peer_judged", "peer_pass_rate", "agree", "we_stricter",
                "unexplained")
DISAGREEMENT_COLUMNS = ("task_id", "candidate_id", "ours", "peer", "error_kind", "cause")


def has_peer(df: pd.DataFrame) -> bool:
    return "peer_verdict" in df and bool(df["peer_verdict"].fillna("").ne("").any())


def _judged(df: pd.DataFrame) -> pd.DataFrame:
    rows = final_rows(df).copy()
    rows["peer"] = rows["peer_verdict"].fillna("")
    rows["ours"] = rows["exec_ok"].fillna(False).map({True: "pass", False: "fail"})
    rows["cause"] = rows["stricter_reason"].fillna("") if "stricter_reason" in rows else ""
    return rows


def peer_table(df: pd.DataFrame) -> pd.DataFrame:
    """PEER_COLUMNS per sweep, category and hardware (the peer's figures: the rows it judged)."""
    rows = _judged(df)
    out = []
    for key, g in rows.groupby(["sweep_id", "category", "hardware"], dropna=False):
        judged = g[g["peer"] != ""]
        differ = judged[judged["peer"] != judged["ours"]]
        stricter = differ[(differ["ours"] == "fail") & (differ["cause"] != "")]
        out.append({**dict(zip(("sweep_id", "category", "hardware"), key)), "kernels": len(g),
                    "exec_rate": float(g["exec_ok"].fillna(False).mean()),
                    "peer_judged": len(judged),
                    "peer_pass_rate": float((judged["peer"] == "pass").mean()) if len(judged)
                    else float("nan"),
                    "agree": float((judged["peer"] == judged["ours"]).mean()) if len(judged)
                    else float("nan"),
                    "we_stricter": len(stricter), "unexplained": len(differ) - len(stricter)})
    return pd.DataFrame(out, columns=["sweep_id", "category", "hardware", *PEER_COLUMNS])


def disagreements(df: pd.DataFrame) -> pd.DataFrame:
    """Each kernel whose verdict differs from the peer's, with the cause the record carries
    (empty: not explained by a stricter check of ours; look at its error_msg)."""
    rows = _judged(df)
    rows = rows[(rows["peer"] != "") & (rows["peer"] != rows["ours"])]
    return rows.reindex(columns=list(DISAGREEMENT_COLUMNS)).reset_index(drop=True)
