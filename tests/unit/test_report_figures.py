"""Every figure on real data, on sparse data, on an untimed (CPU) sweep and on an empty one.

A figure never crashes the report. One with no data is not drawn (None; the report says why in
its place, tests/unit/test_report_layout.py), so a CPU sweep has no empty timing frames.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from kbx_ray.report import compute_tables, load_evaluations
from kbx_ray.report.figures import FIGURES, palette
from kbx_ray.report.render import make_figures
from kbx_ray.sinks import ParquetSink
from tests.unit.test_report_tables import ONE_SHOT, REPAIR


@pytest.fixture(scope="module")
def df(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    sweep = tmp_path_factory.mktemp("results") / "sw"
    ParquetSink(sweep).write_evaluations(ONE_SHOT + REPAIR)
    return load_evaluations([sweep])[0]


def drawn(path: Path) -> bool:
    """A real PNG with something dark on it (axes, text), not a blank canvas."""
    image = Image.open(path)
    image.load()
    return image.format == "PNG" and image.convert("L").getextrema()[0] < 100


@pytest.mark.parametrize("case", ["full", "sparse", "untimed", "empty"])
def test_every_figure_is_written(case: str, df: pd.DataFrame, tmp_path: Path) -> None:
    data = {
        "full": df,
        # a category x method combination with no cells: a blank square in the heatmap
        "sparse": df[~((df["method"] == "repair") & (df["category"] == "Fusion"))],
        "untimed": df.assign(speedup=float("nan"), sol_fraction=float("nan")),
        "empty": df.iloc[:0],
    }[case]
    figs = make_figures(data, compute_tables(data), tmp_path)
    assert tuple(figs) == FIGURES
    expected = {"full": FIGURES, "sparse": FIGURES, "empty": (),
                "untimed": ("pass_heatmap", "repair_rounds")}[case]
    assert tuple(name for name, p in figs.items() if p is not None) == expected
    assert all(drawn(figs[name]) for name in expected)
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(f"{n}.png" for n in expected)


def test_palette_gives_each_variant_one_colour_everywhere() -> None:
    assert palette(["repair", "one_shot", "repair"]) == {"one_shot": "C0", "repair": "C1"}
