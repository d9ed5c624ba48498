"""Every figure on real data, on sparse data, on an untimed (CPU) sweep and on an empty one.

A figure never crashes the report: missing data give a placeholder that says why, so a CPU
sweep still yields all five PNGs.
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
    assert all(drawn(p) for p in figs.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.png" for n in FIGURES)


def test_palette_gives_each_variant_one_colour_everywhere() -> None:
    assert palette(["repair", "one_shot", "repair"]) == {"one_shot": "C0", "repair": "C1"}
