"""kbx_ray/records/metrics.py: the one geometric mean, as a list function and as a running tally."""
from __future__ import annotations

import math

import pytest

from kbx_ray.records.metrics import GeoMean, Tally, geomean


def test_geomean_counts_only_positive_finite_values():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, 8.0, 0.0, -1.0, None, math.nan, math.inf]) == pytest.approx(4.0)
    assert math.isnan(geomean([])) and math.isnan(geomean([0.0, None]))


def test_running_geomean_merges_like_the_list_one():
    a, b = GeoMean(), GeoMean()
    assert [a.add(v) for v in (2.0, 0.0)] == [True, False] and b.add(8.0)
    assert (a + b).value == pytest.approx(geomean([2.0, 8.0])) and (a + b).n == 2
    assert math.isnan(GeoMean().value)


def test_tally_geomean_is_over_correct_rows_only():
    t = Tally()
    for row in ({"exec_ok": True, "speedup": 2.0}, {"exec_ok": True, "speedup": 8.0},
                {"exec_ok": False, "speedup": 100.0}, {"exec_ok": True, "speedup": None}):
        t.add(row)
    m = t.metrics()
    assert m["geomean_speedup"] == pytest.approx(4.0) and m["fast_1p5"] == pytest.approx(2 / 4)
    assert "geomean_speedup" not in Tally().metrics()


def test_a_verdict_that_awaits_a_gpu_never_raises_a_pass_rate():
    """A CPU record filed `unsupported_interpreter` (flag `awaits_gpu`) has no verdict: a wrong
    kernel can hide behind the construct the interpreter lacks. It counts in the denominator, as
    awaiting a GPU, and never as a pass, even if a row said exec_ok."""
    t = Tally()
    for row in ({"exec_ok": True, "call_ok": True, "speedup": 2.0},
                {"exec_ok": False, "call_ok": True, "error_kind": "unsupported_interpreter",
                 "flags": ["awaits_gpu"]},
                {"exec_ok": True, "call_ok": True, "error_kind": "unsupported_interpreter",
                 "speedup": 3.0},
                {"exec_ok": True, "call_ok": True, "flags": ["awaits_gpu"], "speedup": 3.0}):
        t.add(row)
    m = t.metrics()
    assert m["exec_rate"] == pytest.approx(1 / 4) and m["awaits_gpu_rate"] == pytest.approx(3 / 4)
    assert m["fast_1"] == pytest.approx(1 / 4) and m["geomean_speedup"] == pytest.approx(2.0)
