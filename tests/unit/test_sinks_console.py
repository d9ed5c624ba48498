"""The console sink's numbers (summarize) and its two display modes (terminal and log lines)."""
from __future__ import annotations

import io
import logging
import math

import pandas as pd
import pytest
from rich.console import Console

from kbx_ray.sinks.console import ConsoleSink, summarize


def row(cell: str, category: str, call_ok: bool, exec_ok: bool, speedup: float | None,
        final: bool | None = True) -> dict:
    return dict(cell_id=cell, category=category, call_ok=call_ok, exec_ok=exec_ok,
                speedup=speedup, final=final)


ROWS = [
    # Activation: a repair cell whose round 0 failed (not final: must not count), then 3 more.
    row("a1", "Activation", False, False, None, final=False),
    row("a1", "Activation", True, True, 2.0),
    row("a2", "Activation", True, True, 8.0),
    row("a3", "Activation", True, False, 100.0),   # not exec_ok: its speedup must be ignored
    row("a4", "Activation", True, True, None, final=None),  # final unset counts as final
    # Reduce: one call failure, one wrong answer.
    row("r1", "Reduce", False, False, None),
    row("r2", "Reduce", True, False, None),
]


def test_summarize_exact_rates_and_geomean() -> None:
    s = summarize(pd.DataFrame(ROWS))
    assert list(s.index) == ["Activation", "Reduce", "total"]
    assert list(s.columns) == ["cells", "call_rate", "exec_rate", "geomean_speedup"]
    act, red, tot = s.loc["Activation"], s.loc["Reduce"], s.loc["total"]
    assert act.cells == 4 and act.call_rate == 1.0 and act.exec_rate == 0.75
    assert act.geomean_speedup == pytest.approx(4.0)  # sqrt(2 * 8)
    assert red.cells == 2 and red.call_rate == 0.5 and red.exec_rate == 0.0
    assert math.isnan(red.geomean_speedup)
    assert tot.cells == 6 and tot.call_rate == pytest.approx(5 / 6)
    assert tot.exec_rate == pytest.approx(3 / 6) and tot.geomean_speedup == pytest.approx(4.0)


def test_summarize_reads_parquet_dtypes() -> None:
    """read_table gives nullable boolean columns; summarize must treat <NA> as not ok."""
    df = pd.DataFrame(ROWS[1:3] + [row("x", "Math", None, None, None)])  # type: ignore[arg-type]
    df = df.astype({"call_ok": "boolean", "exec_ok": "boolean", "final": "boolean"})
    s = summarize(df)
    assert s.loc["Math"].call_rate == 0.0 and s.loc["total"].exec_rate == pytest.approx(2 / 3)


def test_sink_keeps_tallies_not_rows_and_sums_up_like_summarize() -> None:
    """A 100k-cell sweep must not grow the driver: the sink's summary comes from running sums."""
    sink = ConsoleSink(console=Console(file=io.StringIO()))
    sink.start(6, {})
    sink.write_evaluations(ROWS[:3])
    sink.write_evaluations(ROWS[3:])
    pd.testing.assert_frame_equal(sink.summary(), summarize(pd.DataFrame(ROWS)))
    assert not any(isinstance(v, list) and v for v in vars(sink).values())


def test_not_a_tty_logs_progress_lines_and_prints_summary(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    sink = ConsoleSink(console=Console(file=out, width=100), log_every_s=0.0)
    caplog.set_level(logging.INFO, logger="kbx_ray.sinks.console")
    sink.start(6, {})
    sink.write_evaluations(ROWS[:3])
    sink.write_evaluations(ROWS[3:])
    sink.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "sweep started: 6 cells to run"
    assert lines[1].startswith("2/6 cells done, 0 failed")
    assert lines[2].startswith("6/6 cells done, 3 failed")
    text = out.getvalue()
    assert "Summary by category" in text and "Activation" in text and "75.0%" in text
    assert "\x1b[" not in text  # no control codes in a log file


def test_terminal_shows_a_progress_bar() -> None:
    out = io.StringIO()
    sink = ConsoleSink(console=Console(file=out, force_terminal=True, width=120))
    sink.start(6, {})
    sink.write_evaluations(ROWS)
    sink.close()
    assert sink.done == 6 and sink.failed == 3
    text = out.getvalue()
    assert "6/6" in text and "3 failed" in text and "cells/s" in text
    assert "Summary by category" in text


def test_after_a_resume_the_summary_counts_the_whole_sweep_this_runs_cells_in_brackets(
        tmp_path) -> None:
    """A resumed run sees only its own rows; its summary reads the whole sweep back from the
    folder's Parquet (which closes before the console), so the counts are the sweep's."""
    from kbx_ray.sinks.parquet import ParquetSink

    earlier, now = ROWS[:4], ROWS[4:]  # a1..a3 recorded by a first run; a4, r1, r2 by this one
    first = ParquetSink(tmp_path)
    first.start(4, {})
    first.write_evaluations(earlier)
    first.close()
    record, out = ParquetSink(tmp_path), io.StringIO()
    sink = ConsoleSink(console=Console(file=out, width=120), sweep_dir=tmp_path)
    for s in (record, sink):
        s.start(3, {})
        s.write_evaluations(now)
    record.close()
    sink.close()
    text = out.getvalue()
    assert "Summary by category of the whole sweep (this run in brackets)" in text
    cells = {line.split("│")[1].strip(): line.split("│")[2].strip()
             for line in text.splitlines() if line.count("│") > 3}
    assert cells == {"Activation": "4 (1)", "Reduce": "2 (2)", "total": "6 (3)"}, text
    # a first run (nothing earlier in its folder) has no brackets
    fresh, out = tmp_path / "fresh", io.StringIO()
    only = ConsoleSink(console=Console(file=out, width=120), sweep_dir=fresh)
    only.start(3, {})
    only.write_evaluations(now)
    only.close()
    assert "brackets" not in out.getvalue() and "(1)" not in out.getvalue()


def test_quiet_shows_no_progress_and_no_summary(caplog: pytest.LogCaptureFixture) -> None:
    """`kbx -q` sets the sink's logger to WARNING: warnings and errors only."""
    out = io.StringIO()
    logging.getLogger("kbx_ray.sinks.console").setLevel(logging.WARNING)
    try:
        sink = ConsoleSink(console=Console(file=out, force_terminal=True, width=120),
                           log_every_s=0.0)
        caplog.set_level(logging.INFO)
        sink.start(6, {})
        sink.write_evaluations(ROWS)
        sink.close()
    finally:
        logging.getLogger("kbx_ray.sinks.console").setLevel(logging.NOTSET)
    assert out.getvalue() == "" and not caplog.records and sink.done == 6
