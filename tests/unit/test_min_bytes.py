"""The speed-of-light check uses a task's `min_bytes` and `min_flops` (the work no correct kernel
can avoid) where its cost gives them; the reported GB/s, TFLOP/s and SOL fraction keep `bytes` and
`flops`."""
from types import SimpleNamespace

import pytest

from kbx_ray.evaluate.parent.case_checks import Fail
from kbx_ray.evaluate.parent.roofline import floor_fraction, roofline
from kbx_ray.evaluate.parent.timing_judgement import judge_timing
from kbx_ray.evaluate.reply import TimedCheck
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.common.timing import Timing
from kbx_ray.types import CaseResult, EvalResult

PEAK_GBPS = 1000.0   # 1 GB per ms
MS = 1.0


def _judge(cost: dict) -> CaseResult:
    cfg = EvalConfig()
    cfg.peak_gbps, cfg.peak_tflops = PEAK_GBPS, {"float32": 1000.0}
    t = Timing(median_ms=MS, p20_ms=MS, p80_ms=MS, reps=100, rel_ci=0.0, wall_s=1.0,
               event_sum_ms=100.0, sync_tail_ms=0.0, feed="queued")
    checked = TimedCheck(calls=1, launchless=0, repeated=0, error="", samples=(), fresh_ms=())
    ref_t = Timing(median_ms=2.0, p20_ms=2.0, p80_ms=2.0, reps=10, rel_ci=0.0, wall_s=1.0,
                   event_sum_ms=20.0)
    cr = CaseResult(case="big")
    res = EvalResult(task_id="t/x", candidate_id="c")
    judge_timing(cfg, "cuda", {"name": "big"}, cr, res, t, 1000.0, ref_t, checked,
                 SimpleNamespace(cost=lambda case: cost), "float32")
    return cr


def test_min_bytes_bounds_the_impossibility_check():
    # 1.2 GB in 1 ms at 1000 GB/s: 120% of peak by `bytes`, 60% by `min_bytes`
    cr = _judge({"flops": 0, "bytes": 1_200_000_000, "min_bytes": 600_000_000})
    assert cr.sol_fraction == pytest.approx(1.2) and cr.gbps == pytest.approx(1200.0)


def test_without_min_bytes_bytes_bound_it():
    with pytest.raises(Fail) as e:
        _judge({"flops": 0, "bytes": 1_200_000_000})
    assert e.value.kind == "timing_invalid" and "120%" in e.value.msg


def test_min_bytes_above_the_limit_still_fails():
    with pytest.raises(Fail) as e:
        _judge({"flops": 0, "bytes": 2_000_000_000, "min_bytes": 1_100_000_000})
    assert e.value.kind == "timing_invalid" and "110%" in e.value.msg


def test_floor_fraction_keeps_flops():
    cost = {"flops": 2 * 10**12, "bytes": 10**9, "min_bytes": 10}
    assert floor_fraction(cost, MS, PEAK_GBPS, 1000.0) == pytest.approx(2.0)  # flops bound it
    assert roofline(cost, MS, PEAK_GBPS, 1000.0)[0] == pytest.approx(1000.0)  # GB/s from bytes
    assert floor_fraction(cost, MS, 0.0, 0.0) is None


def test_min_flops_bounds_the_compute_side():
    # 2 TFLOP in 1 ms on a 1000 TFLOP/s peak: 200% by `flops`, 50% by `min_flops`
    cost = {"flops": 2 * 10**12, "min_flops": 5 * 10**11, "bytes": 10}
    assert floor_fraction(cost, MS, PEAK_GBPS, 1000.0) == pytest.approx(0.5)
    cr = _judge(cost)
    assert cr.sol_fraction == pytest.approx(2.0) and cr.tflops == pytest.approx(2000.0)
