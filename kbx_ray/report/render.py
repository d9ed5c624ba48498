"""Result dirs -> report.md (tables + linked figures) and a self-contained report.html.

Both documents come from one list of `Section`s (report/sections.py), so they can never disagree.
The HTML embeds every figure as a base64 data URI, its style and its few lines of script inline: it
is one file that can be mailed or attached to a W&B report, and it loads nothing from anywhere. Its
tables sort by a click, and its results browser links each cell to its rounds and kernel text.
"""
from __future__ import annotations

import base64
import html
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from kbx_ray.report import browse, cells, figures, rejudged, sections as parts, what_ran
from kbx_ray.report.load import SweepSource, load_evaluations
from kbx_ray.report.sections import Section
from kbx_ray.report.tables import Tables, compute_tables, timed_correct

logger = logging.getLogger(__name__)

PERCENT = frozenset({"call_rate", "exec_rate", "fast_1", "fast_1p5", "fast_2",
                     "slower_than_eager", "mean_sol_fraction", "sol_fraction",
                     "pass@1", "pass@5", "pass@10", "pass@100"}) | rejudged.PERCENT
TIMES = frozenset({"speedup", "sum_ratio", "mean_task_ratio", "geomean_speedup", "min_speedup",
                   "max_speedup", "spread"}) | rejudged.TIMES
HEADERS = {"call_rate": "call rate", "exec_rate": "exec rate", "fast_1p5": "fast_1.5", "sum_ratio": "Σref/Σgen", "mean_task_ratio": "mean task ratio",
           "geomean_speedup": "geomean speedup", "slower_than_eager": "slower than eager",
           "mean_sol_fraction": "mean SOL", "sweep_id": "sweep", "task_id": "task",
           "hardware": "pool", "sol_fraction": "SOL"}
DEFINITIONS = (
    "Rates are over each cell's final kernel, per GPU pool (one cell = task × method × model × "
    "sample; its rounds are judged on the first pool and its final kernel checked on every pool, "
    "so each pool has its own row and no rate averages GPUs). call = ran on the first case; "
    "exec = correct on every case and seed; fast_p = correct and faster than eager by more than "
    "p, over all cells. Speedups are over correct, timed "
    "kernels: Σref/Σgen = Σ eager ms / Σ candidate ms over all their timed cases; mean task ratio "
    "= the mean over tasks of each task's own Σ ratio; geomean speedup = the geometric mean of each "
    "kernel's speedup (itself the geomean over its cases). – means not measured: fast_p of a "
    "group with correct kernels but no timing (a CPU sweep) is unknown, not 0.")


@dataclass(frozen=True)
class ReportPaths:
    out_dir: Path
    markdown: Path
    html: Path
    figures: list[Path]


def build_report(result_dirs: list[Path], out_dir: Path) -> ReportPaths:
    """Read every sweep under `result_dirs`, write report.md, report.html and figures/*.png."""
    out_dir = Path(out_dir)
    df, sources = load_evaluations(result_dirs)
    tables = compute_tables(df)
    figs = make_figures(df, tables, out_dir / "figures")
    sections = build_sections(df, tables, figs, cells.kernel_texts(sources))
    sections += parts.rejudged_sections(df, sources, out_dir / "figures")
    sections.append(Section("What ran", what_ran.NOTE, what_ran.provenance_table(sources)))
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(render_markdown(sections, sources, out_dir), encoding="utf-8")
    page.write_text(render_html(sections, sources), encoding="utf-8")
    logger.debug("report: %s, %s, %d figures", md, page, len(figs))
    return ReportPaths(out_dir, md, page, [f for f in figs.values() if f is not None])


def make_figures(df: pd.DataFrame, tables: Tables, fig_dir: Path) -> dict[str, Path | None]:
    """Every figure of FIGURES by name; None for one with no data to draw (see parts.left_out)."""
    colors = figures.palette(df["variant"]) if "variant" in df.columns else {}
    return {
        "pass_heatmap": figures.pass_heatmap(df, fig_dir / "pass_heatmap.png"),
        "repair_rounds": figures.repair_rounds(tables.ablation, fig_dir / "repair_rounds.png",
                                               colors),
        "speedup_cdf": figures.speedup_cdf(df, fig_dir / "speedup_cdf.png", colors),
        "gpu_spread": figures.gpu_spread(tables.gpu_spread, fig_dir / "gpu_spread.png"),
        "sol_fraction": figures.sol_fraction(df, fig_dir / "sol_fraction.png", colors),
    }


def build_sections(df: pd.DataFrame, t: Tables, figs: dict[str, Path | None],
                   texts: cells.KernelTexts) -> list[Section]:
    timed = timed_correct(df)
    slower = (f"{(timed['speedup'] < 1).mean():.1%} of {len(timed)} correct timed kernels are "
              "slower than eager." if len(timed) else "")

    def note(name: str, text: str = "") -> str:  # a figure left out says why in its place
        return text if figs[name] is not None else " ".join(
            filter(None, [text, parts.left_out(name, df)]))

    return [
        Section("Definitions", DEFINITIONS),
        *parts.browser_sections(df, texts),
        Section("Exec rate by category and method", note("pass_heatmap"),
                figure=figs["pass_heatmap"]),
        Section("Rates by method", table=t.by_method),
        Section("Rates by category", table=t.by_category),
        Section("Speedup of correct kernels, per GPU pool", table=t.speedup),
        Section("Repair rounds", "The result after k rounds is the state after min(k, stop) "
                "rounds of one run: the answer the method would have given from the cell's rows "
                "with round ≤ k (its best: correct, then faster, then callable; ties to the "
                "earliest), on the primary pool, where rounds are judged. Cells count once here.",
                t.ablation, figs["repair_rounds"]),
        Section("Speedup distribution", note("speedup_cdf", slower), figure=figs["speedup_cdf"]),
        Section("Speedup of the same kernel across GPUs", note("gpu_spread", "The widest max/min "
                "speedup ratio of one kernel (same code) across GPU pools, per task; top 10 "
                "below."), t.gpu_spread.head(10), figs["gpu_spread"]),
        Section("SOL fraction", note("sol_fraction"), figure=figs["sol_fraction"]),
        *parts.peer_sections(df),
    ]


def fmt(column: str, value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if column in PERCENT:
        return f"{value:.1%}"
    if column in TIMES:
        return f"{value:.2f}×"
    return str(value)


def _cells(table: pd.DataFrame) -> Iterable[list[str]]:
    for row in table.itertuples(index=False):
        yield [fmt(c, v) for c, v in zip(table.columns, row)]


def _summary(sources: list[SweepSource]) -> list[tuple[str, str, str]]:
    return [(s.sweep_id, str(s.path), f"{s.rows} evaluation rows") for s in sources]


def render_markdown(sections: list[Section], sources: list[SweepSource], out_dir: Path) -> str:
    lines = ["# kbx_ray report", ""]
    lines += [f"- **{sid}**: `{where}`, {rows}" for sid, where, rows in _summary(sources)] + [""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.note:
            lines += [s.note, ""]
        if s.figure is not None:
            lines += [f"![{s.title}]({s.figure.relative_to(out_dir).as_posix()})", ""]
        if s.table is not None:
            lines += _markdown_table(s.table) + [""]
    return "\n".join(lines)


def _markdown_table(table: pd.DataFrame) -> list[str]:
    if table.empty:
        return ["_no rows_"]
    esc = lambda v: v.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    head = [esc(HEADERS.get(c, c)) for c in table.columns]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(map(esc, r)) + " |" for r in _cells(table)]


STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}
td:first-child,th:first-child{text-align:left}img{max-width:100%;display:block;margin:.5em 0}
""" + browse.CSS


def render_html(sections: list[Section], sources: list[SweepSource]) -> str:
    e = html.escape
    body = ["<h1>kbx_ray report</h1>", "<ul>"]
    body += [f"<li><b>{e(sid)}</b>: <code>{e(where)}</code>, {e(rows)}</li>"
             for sid, where, rows in _summary(sources)]
    body.append("</ul>")
    for s in sections:
        body.append(f"<h2>{e(s.title)}</h2>")
        if s.note:
            body.append(f"<p>{e(s.note)}</p>")
        if s.figure is not None:
            data = base64.b64encode(s.figure.read_bytes()).decode("ascii")
            body.append(f'<img alt="{e(s.title)}" src="data:image/png;base64,{data}">')
        if s.html:
            body.append(s.html)
        elif s.table is not None:
            body.append(_html_table(s.table))
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>kbx_ray report</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n{browse.SORT_JS}\n</body></html>\n")


def _html_table(table: pd.DataFrame) -> str:
    if table.empty:
        return "<p><i>no rows</i></p>"
    e = html.escape
    head = "".join(f"<th>{e(HEADERS.get(c, c))}</th>" for c in table.columns)
    rows = "".join("<tr>" + "".join(_html_cell(v, text) for v, text in zip(raw, r)) + "</tr>"
                   for raw, r in zip(table.itertuples(index=False), _cells(table)))
    return (f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


def _html_cell(value: object, text: str) -> str:
    """A number carries its value (data-v), so a click sorts 9% below 10%; "–" sorts lowest."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = "" if isinstance(value, float) and math.isnan(value) else value
        return f'<td data-v="{v}">{html.escape(text)}</td>'
    return f"<td>{html.escape(text)}</td>"


__all__ = ["ReportPaths", "Section", "build_report", "render_html", "render_markdown"]
