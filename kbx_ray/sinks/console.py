"""Evaluation rows -> a live progress bar on stderr and a per-category summary at the end.

A sweep runs for hours, so the person at the terminal wants done/total, failures, rate and ETA at a
glance. In CI or under nohup stderr is not a terminal and a redrawn bar would fill the log with
control codes, so the same facts are logged as a line every `log_every_s` seconds instead.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.progress import TimeRemainingColumn
from rich.table import Table

from kbx_ray.records.metrics import GeoMean, geomean, is_final
from kbx_ray.registry import register
from kbx_ray.sinks.base import Sink, SinkContext

logger = logging.getLogger(__name__)

def _quiet() -> bool:
    """`kbx -q`: it sets this module's logger to WARNING, and the sink then shows no progress and
    no summary (its level is its own, not inherited: unset, the sink shows them)."""
    return logger.level > logging.INFO


SUMMARY_COLUMNS = ["cells", "call_rate", "exec_rate", "geomean_speedup"]


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per-category cells, call rate, exec rate and geomean speedup, plus a last row 'total'.

    Rates are over each cell's final row (see kbx_ray/records/metrics.py); the geomean is over final
    rows that are exec_ok and have a speedup, and is NaN where there are none.
    """
    if "final" in df.columns:
        df = df[df["final"].astype("boolean").fillna(True).astype(bool)]
    out = {}
    for category, group in [*df.groupby("category", sort=True), ("total", df)]:
        out[category] = _summary_row(group)
    result = pd.DataFrame.from_dict(out, orient="index", columns=SUMMARY_COLUMNS)
    result.index.name = "category"
    return result.astype({"cells": "int64"})


def _summary_row(group: pd.DataFrame) -> list[float]:
    cells = group["cell_id"].nunique() if "cell_id" in group.columns else len(group)
    call = group["call_ok"].astype("boolean").fillna(False).astype(bool)
    ok = group["exec_ok"].astype("boolean").fillna(False).astype(bool)
    n = max(len(group), 1)
    speedups = pd.to_numeric(group.loc[ok, "speedup"], errors="coerce").dropna().tolist()
    return [cells, call.sum() / n, ok.sum() / n, geomean(speedups)]


class _Tally:
    """The running sums behind one row of `summarize`, so the sink keeps no rows."""

    def __init__(self) -> None:
        self.cells = self.rows = self.call_ok = self.exec_ok = 0
        self.speedup = GeoMean()

    def add(self, final_rows: list[dict], cells: int) -> None:
        self.cells += cells
        for r in final_rows:
            self.rows += 1
            self.call_ok += bool(r.get("call_ok"))
            ok = bool(r.get("exec_ok"))
            self.exec_ok += ok
            if ok:
                self.speedup.add(r.get("speedup"))

    def merged(self, other: _Tally) -> _Tally:
        out = _Tally()
        for k in vars(out):
            setattr(out, k, getattr(self, k) + getattr(other, k))
        return out

    def summary(self) -> list[float]:
        n = max(self.rows, 1)
        return [self.cells, self.call_ok / n, self.exec_ok / n, self.speedup.value]


def summary_table(summary: pd.DataFrame, this_run: dict[str, int] | None = None) -> Table:
    """The summary as a table; with `this_run` (category -> cells this run recorded, "total"
    included) the summary is the whole sweep's and each count says this run's part in brackets."""
    title = "Summary by category" + (" of the whole sweep (this run in brackets)"
                                     if this_run is not None else "")
    table = Table(title=title)
    for name, justify in [("category", "left"), ("cells", "right"), ("call rate", "right"),
                          ("exec rate", "right"), ("geomean speedup", "right")]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, (category, row) in enumerate(summary.iterrows()):
        speedup = "-" if math.isnan(row.geomean_speedup) else f"{row.geomean_speedup:.2f}x"
        cells = str(int(row.cells))
        if this_run is not None:
            cells += f" ({this_run.get(str(category), 0)})"
        table.add_row(str(category), cells, f"{row.call_rate:.1%}",
                      f"{row.exec_rate:.1%}", speedup, end_section=i == len(summary) - 2)
    return table


class ConsoleSink(Sink):
    """Progress while the sweep runs; the summary table at close. Never critical."""

    def __init__(self, console: Console | None = None, log_every_s: float = 30.0,
                 sweep_dir: Path | None = None) -> None:
        # outside a terminal (a log file, CI) lines are never wrapped at 80 columns
        self.console = console or Console(stderr=True, width=None if sys.stderr.isatty() else 200)
        self.sweep_dir = sweep_dir  # where a resumed sweep's earlier rows are read at the end
        self.log_every_s = log_every_s
        self.total = 0
        self.done = 0
        self.failed = 0  # cells whose final row is not exec_ok
        self._tallies: dict[str, _Tally] = {}  # per category: what the summary needs, no rows
        self._t0 = self._last_log = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def start(self, total_cells: int, resolved_config: dict) -> None:
        self.total = total_cells
        self._t0 = self._last_log = time.monotonic()
        if _quiet():  # -q: warnings and errors only
            return
        if self.console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]cells"), BarColumn(), MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failed]} failed"), TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(), console=self.console)
            self._task = self._progress.add_task("cells", total=total_cells, failed=0, rate="")
            self._progress.start()
        else:
            logger.info("sweep started: %d cells to run", total_cells)

    def write_evaluations(self, rows: list[dict]) -> None:
        final = [r for r in rows if is_final(r)]
        self.done += len({r.get("cell_id") for r in rows})
        self.failed += sum(not r.get("exec_ok") for r in final)
        by_category: dict[str, list[dict]] = {}
        for r in final:
            by_category.setdefault(r.get("category"), []).append(r)
        for category, group in by_category.items():  # a batch holds whole cells: counted once
            self._tallies.setdefault(category, _Tally()).add(
                group, len({r.get("cell_id") for r in group}))
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        rate = self.done / elapsed
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done, failed=self.failed,
                                  rate=f"{rate:.2f} cells/s")
        elif _quiet():
            return
        elif time.monotonic() - self._last_log >= self.log_every_s or self.done >= self.total:
            self._last_log = time.monotonic()
            left = max(self.total - self.done, 0)
            eta = f"{left / rate:.0f}s" if rate > 0 else "?"
            logger.info("%d/%d cells done, %d failed, %.2f cells/s, ETA %s",
                        self.done, self.total, self.failed, rate, eta)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._tallies and not _quiet():
            self.console.print(self._final_table())

    def _final_table(self) -> Table:
        """This run's summary; after a resume, the whole sweep's (read back from its Parquet,
        which closes first), with this run's cells in brackets."""
        mine = self.summary()
        if self.sweep_dir is None:
            return summary_table(mine)
        from kbx_ray.sinks.parquet import read_table

        try:
            whole = summarize(read_table(self.sweep_dir, "evaluations"))
        except Exception as e:  # noqa: BLE001 - never critical: this run's summary then
            logger.debug("summary of the whole sweep not read: %s", e)
            return summary_table(mine)
        if whole.loc["total", "cells"] <= mine.loc["total", "cells"]:
            return summary_table(mine)  # a first run: no brackets
        return summary_table(whole, {str(k): int(v) for k, v in mine["cells"].items()})

    def summary(self) -> pd.DataFrame:
        """`summarize` of every final row seen, from the running tallies."""
        cats = sorted(c for c in self._tallies if c is not None)  # as groupby drops None
        total = _Tally()
        for tally in self._tallies.values():
            total = total.merged(tally)
        out = {c: self._tallies[c].summary() for c in cats}
        out["total"] = total.summary()
        result = pd.DataFrame.from_dict(out, orient="index", columns=SUMMARY_COLUMNS)
        result.index.name = "category"
        return result.astype({"cells": "int64"})


@register("sink", "console")
def build(ctx: SinkContext) -> ConsoleSink:
    return ConsoleSink(sweep_dir=ctx.sweep_dir)
