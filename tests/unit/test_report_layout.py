"""Figures laid out from their text extents, for any number of sweeps (issue 41).

Two sweeps side by side once clipped the heatmap's title, overlapped its cell labels ("100%100%")
and cut its x labels, while every image still "rendered". Here the check reads the boxes of the
text each figure drew (saved beside its PNG) and fails on any text outside the figure or over
another; it runs on reports of 1, 2 and 6 sweeps, with no browser, so CI runs it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from kbx_ray.report import build_report, layout
from kbx_ray.report.layout import Layout, TextBox
from kbx_ray.sinks import ParquetSink
from tests.unit.test_report_tables import ONE_SHOT, REPAIR, row


def test_problems_name_clipped_and_overlapping_text() -> None:
    found = layout.problems(Layout(100, 50, [
        TextBox("inside", 5, 5, 40, 15), TextBox("over", 30, 10, 60, 20),
        TextBox("touching", 60, 10, 90, 20), TextBox("cut", 80, 40, 120, 55)]))
    assert found == ["'cut' is clipped by the figure's edge", "'inside' overlaps 'over'"]


def cramped_heatmap():
    """The failure of the issue: two columns of "100%\\nn=10" in a figure too small for them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1.6, 1.2), layout="constrained")
    ax = fig.subplots()
    ax.imshow([[1.0, 1.0]], aspect="auto")
    for j in (0, 1):
        ax.text(j, 0, "100%\nn=10", ha="center", va="center", fontsize=8)
    ax.set_xticks([0, 1], ["sweep-one\none_shot", "sweep-two\none_shot"])
    ax.set_title("Exec (pass) rate by category and method")
    return fig


def test_fit_grows_a_cramped_figure_until_no_text_clashes() -> None:
    fig = cramped_heatmap()
    before = layout.problems(layout.measure(fig))
    assert any("overlaps" in p for p in before) and any("clipped" in p for p in before)
    fitted = layout.fit(fig)
    assert layout.problems(fitted) == [] and fitted.width > 1.6 * fig.dpi
    assert {"100%\nn=10", "Exec (pass) rate by category and method"} <= {
        t.text for t in fitted.texts}


def sweep_rows(sweep: str) -> list[dict]:
    return [{**r, "sweep_id": sweep} for r in ONE_SHOT + REPAIR]


@pytest.mark.parametrize("n_sweeps", [1, 2, 6])
def test_every_figure_of_a_report_lays_out_its_text(n_sweeps: int, tmp_path: Path) -> None:
    for i in range(n_sweeps):
        ParquetSink(tmp_path / f"sweep-with-a-long-name-{i}").write_evaluations(
            sweep_rows(f"sweep-with-a-long-name-{i}"))
    paths = build_report([tmp_path], tmp_path / "report")
    assert len(paths.figures) == 5
    for png in paths.figures:
        drawn = layout.load(layout.sidecar(png))
        assert layout.problems(drawn) == [], png.name
        with Image.open(png) as im:  # the boxes describe the PNG as saved
            assert abs(im.size[0] - drawn.width) <= 1 and abs(im.size[1] - drawn.height) <= 1
        assert len(drawn.texts) >= 5
    heat = layout.load(layout.sidecar(paths.out_dir / "figures" / "pass_heatmap.png"))
    labels = [t.text for t in heat.texts]
    # one cell label ("50%\nn=2") per sweep x method x category, all drawn
    assert sum("\nn=" in t for t in labels) == n_sweeps * 2 * 3
    assert "Exec (pass) rate by category and method" in labels


def test_a_timed_report_keeps_its_timing_figures_and_a_cpu_one_says_why_not(tmp_path) -> None:
    ParquetSink(tmp_path / "cpu").write_evaluations([
        {**row("one_shot", "Activation", "cpu", 0, call=True, ok=True, sweep="cpu"),
         "timing_skipped": "no GPU: correctness ran under the Triton interpreter"}])
    paths = build_report([tmp_path / "cpu"], tmp_path / "report")
    assert sorted(p.stem for p in paths.figures) == ["pass_heatmap", "repair_rounds"]
    md = paths.markdown.read_text()
    reason = ("Left out: timing was skipped for every correct kernel (no GPU: correctness ran "
              "under the Triton interpreter); timing needs a GPU.")
    assert md.count(reason) == 3  # speedup CDF, GPU spread, SOL fraction
    assert json.loads((tmp_path / "report" / "figures" / "repair_rounds.layout.json"
                       ).read_text())["texts"]
