"""The fresh-set bound (timing_judgement.check_fresh_calls): max(fresh_ratio x median,
median + fresh_floor_us), in microsecond figures of the H200 (issue 27 item 4)."""
import pytest

from kbx_ray.evaluate.case_checks import Fail
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.timing_judgement import check_fresh_calls

CASE = {"name": "c"}


def _check(median_us, fresh_us, floor_us=EvalConfig().fresh_floor_us):
    check_fresh_calls(CASE, {"median_ms": median_us / 1e3}, {"fresh_ms": [x / 1e3 for x in fresh_us]},
                      EvalConfig().fresh_ratio, "cuda", floor_us)


def test_logspace_first_fresh_call_passes():
    # logspace on the H200: 4 us timed, 45 us on its first fresh call, 6 us on the second
    _check(4.0, [45.0, 6.0])
    _check(4.0, [45.0, 47.0])  # both slow: still launch overhead, under 4 + 100 us


def test_without_the_floor_logspace_was_invalid():
    with pytest.raises(Fail) as e:
        _check(4.0, [45.0, 47.0], floor_us=0.0)
    assert e.value.kind == "timing_invalid"


def test_content_cache_miss_still_caught():
    # c6_content_cache_hash on a 16M case: ~70 us a hit (hash, item, copy), a miss computes
    with pytest.raises(Fail):
        _check(70.0, [400.0, 380.0])
    # a long kernel: the ratio bound governs (2 x 1 ms), the floor adds nothing
    _check(1000.0, [1900.0])
    with pytest.raises(Fail):
        _check(1000.0, [2200.0, 2100.0])


def test_bound_is_max_of_ratio_and_floor():
    _check(4.0, [4.0 + 100.0 + 19.0])            # under median + floor (+ 20 us slack)
    with pytest.raises(Fail):
        _check(4.0, [4.0 + 100.0 + 25.0])
