"""The report's parts -> `Section`s: one list that both report.md and report.html are rendered from.

Here: the results browser's sections (verdicts by error kind x category, rates with intervals and
pass@k, the cell table), the note that stands in for a figure with no data, and the sections of a
re-judged study or a peer harness, which appear only when the sweeps hold such kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kbx_ray.report import browse, cells, figures, rejudged, stats
from kbx_ray.report.load import SweepSource, final_rows
from kbx_ray.report.tables import timed_correct


@dataclass(frozen=True)
class Section:
    title: str
    note: str = ""
    table: pd.DataFrame | None = None  # in both documents, unless `html` replaces it there
    figure: Path | None = None
    html: str = ""                     # report.html only: shown in place of `table`


def browser_sections(df: pd.DataFrame, texts: cells.KernelTexts) -> list[Section]:
    """What failed and why: verdict counts, rates with their uncertainty, and every cell."""
    table = cells.cell_table(df)
    shown = table.drop(columns=["anchor", "cell_id"], errors="ignore")
    return [
        Section("Verdicts by error kind and category", "Final kernels (one per cell and GPU "
                "pool) by verdict: correct, or the error kind that failed it.",
                stats.verdict_table(df)),
        Section("Rates with 95% intervals, and pass@k", "Call and exec rates over final kernels "
                "with their 95% Wilson score intervals; pass@k is the unbiased estimator (Chen et "
                "al., 2021) over the samples of each task, averaged over tasks, for each k up to "
                "the samples drawn.", stats.rate_intervals(df)),
        Section("Results browser", "Every final kernel: click a column to sort, type in the box "
                "to filter, follow `rounds` to the cell's rounds and each round's kernel text. "
                "report.md lists the same rows without the kernels.", shown,
                html=browse.browser_html(df, texts)),
    ]


def untimed_reason(df: pd.DataFrame) -> str:
    """Why no speedup exists: a CPU run (timing skipped, its reason quoted) or no correct kernel."""
    rows = final_rows(df)
    correct = rows[rows["exec_ok"]]
    if correct.empty:
        return "no kernel was correct, so none was timed"
    skipped = [s for s in correct.get("timing_skipped", pd.Series(dtype=object)).dropna() if s]
    why = f" ({skipped[0]})" if skipped else ""
    return f"timing was skipped for every correct kernel{why}; timing needs a GPU"


def left_out(name: str, df: pd.DataFrame) -> str:
    """The sentence that stands in for a figure its data cannot fill."""
    if df.empty or final_rows(df).empty:
        return "Left out: no evaluations."
    if name == "gpu_spread" and not timed_correct(df).empty:
        return "Left out: no kernel was timed on two or more GPU pools."
    if name in ("pass_heatmap", "repair_rounds"):
        return "Left out: no evaluations."
    return f"Left out: {untimed_reason(df)}."


def peer_sections(df: pd.DataFrame) -> list[Section]:
    """Replayed kernels judged by another harness: its verdicts next to ours (report/peers.py)."""
    from kbx_ray.report import peers

    if not peers.has_peer(df):
        return []
    return [Section("Verdicts next to the peer harness's", "Per category: our exec rate, the "
                    "peer's pass rate over the kernels whose input carried its verdict, how often "
                    "the two agree, and the disagreements where we fail a kernel on purpose "
                    "(stricter_reason) or for a cause not explained so.", peers.peer_table(df)),
            Section("Disagreements with the peer", "Each one with the cause its record carries.",
                    peers.disagreements(df).head(50))]


def rejudged_sections(df: pd.DataFrame, sources: list[SweepSource], fig_dir: Path) -> list[Section]:
    """A study's corpus re-judged (report/rejudged.py): ours beside theirs, per round."""
    if not rejudged.has_corpus(df):
        return []
    rounds, curve = rejudged.per_round(df), rejudged.curve(df)
    missing, accounting = rejudged.skipped(df, sources)
    timed = bool(rounds["speedup_ours"].notna().any())
    speed = (Section("Speedup per round, ours beside the study's", figure=figures.study_rounds(
        rounds, fig_dir / "study_speedup.png", ("speedup",), "Geomean speedup of correct kernels"))
        if timed else Section("Speedup per round, ours beside the study's", "Left out: this run "
                              "timed no kernel (a CPU run checks correctness only; timing needs a "
                              "GPU), so there is no speedup of ours to set beside the study's."))
    return [
        Section("The study re-judged", "The study's published kernels, each judged by us at the "
                "round the study made it, beside the study's own verdicts of the same kernel, over "
                f"the kernels judged on both sides. {accounting}", rounds),
        Section("Agreement with the study", "Kernels by our verdict (rows) and the study's "
                "(columns); `disqualified` is a failure by a policy of ours (torch compute on the "
                "tested path, the static checks), which agrees with a failure of theirs.",
                rejudged.agreement(df)),
        Section("Disagreements with the study", "Every kernel the two verdicts class "
                "differently, with our reason (error kind and message) and theirs (their verdict "
                "fields and the last line of their error)." + (
                    " This run was on the CPU: a kernel that demands a CUDA device fails here "
                    "(its reason says so), and a GPU run decides it."
                    if set(df["hardware"]) == {"cpu"} else ""),
                rejudged.disagreements(df)),
        Section("Corpus kernels not judged", "Each with its reason.", missing),
        Section("The repair-round curve, rebuilt from the study's kernels", "The state after k "
                "rounds by the ablation's rule (best so far: correct, then faster, then callable), "
                "with our verdicts and with the study's; a kernel judged on one side only counts "
                "on neither.", curve, figures.study_rounds(curve, fig_dir / "study_rounds.png")),
        speed]


__all__ = ["Section", "browser_sections", "left_out", "peer_sections", "rejudged_sections",
           "untimed_reason"]
