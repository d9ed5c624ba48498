"""Verdict counts, Wilson intervals and pass@k, against values worked out by hand.

Wilson 95% (z² = 3.8415) for 0/10: centre = (z²/20) / (1 + z²/10) = 0.1388, half-width the same,
so [0, 0.2775]; for 5/10: centre 0.5, half = z/(1 + z²/10) * sqrt(0.025 + z²/400) = 0.2634, so
[0.2366, 0.7634]. pass@k for n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 0.7.
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from kbx_ray.report import load_evaluations
from kbx_ray.report.stats import pass_at_k, rate_intervals, verdict_table, wilson
from kbx_ray.sinks import ParquetSink
from tests.unit.test_report_tables import ONE_SHOT, REPAIR, row


def test_wilson_interval() -> None:
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert all(math.isnan(v) for v in wilson(0, 0))


def test_pass_at_k() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 4, 2) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    assert math.isnan(pass_at_k(2, 1, 5))


@pytest.fixture
def df(tmp_path) -> pd.DataFrame:
    ParquetSink(tmp_path / "sw").write_evaluations(ONE_SHOT + REPAIR)
    # five samples of one task in a second sweep, two correct: pass@1 0.4, pass@5 1.0
    ParquetSink(tmp_path / "s5").write_evaluations([
        {**row("one_shot", "Activation", "h100", 0, call=i < 3, ok=i < 2, sweep="s5"),
         "cell_id": f"c{i}", "sample": i} for i in range(5)])
    return load_evaluations([tmp_path])[0]


def test_verdicts_by_error_kind_and_category(df: pd.DataFrame) -> None:
    t = verdict_table(df).set_index(["sweep_id", "verdict"])
    # sw: 12 final rows; correct: one_shot Activation x2, repair Activation x2, Reduce h100,
    # Fusion h100; mismatch: one_shot Reduce x2, Fusion x2, repair Reduce a100, Fusion a100
    assert t.loc[("sw", "correct"), ["Activation", "Fusion", "Reduce", "all"]].tolist() == [4, 1, 1, 6]
    assert t.loc[("sw", "mismatch"), ["Activation", "Fusion", "Reduce", "all"]].tolist() == [0, 3, 3, 6]
    assert t.loc[("s5", "mismatch"), "all"] == 3 and list(t.index)[0] == ("s5", "correct")


def test_rates_with_intervals_and_pass_at_k(df: pd.DataFrame) -> None:
    t = rate_intervals(df).set_index(["sweep_id", "method", "hardware"])
    s5 = t.loc[("s5", "one_shot", "h100")]
    assert (s5["tasks"], s5["cells"]) == (1, 5)
    assert s5["exec_rate"] == pytest.approx(0.4) and s5["pass@1"] == pytest.approx(0.4)
    assert s5["pass@5"] == 1.0 and s5["call 95% CI"] == "23%–88%"  # wilson(3, 5)
    sw = t.loc[("sw", "repair", "a100")]  # 1 of 3 correct, one sample per task
    assert sw["exec 95% CI"] == "6%–79%" and math.isnan(sw["pass@5"])
