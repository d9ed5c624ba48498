"""The fresh-set bound (timing_judgement.check_fresh_calls): max(fresh_ratio x median,
median + fresh_floor_us), in microsecond figures of the H200 (issue 27 item 4)."""
import pytest

from kbx_ray.evaluate.parent.case_checks import Fail
from kbx_ray.evaluate.reply import TimedCheck
from kbx_ray.evaluate.common.timing import Timing
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.parent.timing_judgement import check_fresh_calls

CASE = {"name": "c"}


def _check(median_us, fresh_us, floor_us=EvalConfig().fresh_floor_us):
    t = Timing(median_ms=median_us / 1e3, p20_ms=0.0, p80_ms=0.0, reps=10, rel_ci=0.0, wall_s=1.0,
               event_sum_ms=1.0)
    checked = TimedCheck(calls=10, launchless=0, repeated=0, error="", samples=(),
                         fresh_ms=tuple(x / 1e3 for x in fresh_us))
    check_fresh_calls(CASE, t, checked, EvalConfig().fresh_ratio, "cuda", floor_us)


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


def test_a_host_bound_fresh_call_is_called_once_and_timed_by_its_events(monkeypatch):
    """A call that waits on the host inside (an `.item()` hash) never queues behind the gate. Its
    fresh calls were first untimed (None: a content cache passed on the H100), then called again
    behind a longer gate and on the host clock: the second call on the same set was the one judged
    and timed, and a cache that defers its first miss (c6f_deferred_miss_relu) passed on the H100.
    Now a fresh set is called once, behind the gate, and timed by the events around that call,
    which hold its waits (as the timed calls' events held theirs)."""
    import torch

    from kbx_ray.evaluate.common import timing
    from kbx_ray.evaluate.worker import rotation

    x = torch.zeros(8)
    calls, queued = [], []

    def miss(t):
        calls.append(1)
        return t + 1

    class Event:
        def __init__(self, at: float) -> None:
            self.at = at

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, other: "Event") -> float:
            return other.at - self.at

    def never_clean(fn, flush, n, gate_us, ahead, after):  # the host waited inside the call
        queued.append(gate_us)
        fn()
        after()
        return [(Event(0.0), Event(5.0))], 0.0, False, gate_us

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(timing, "_queue", never_clean)
    rot = rotation.Rotation(miss, (x,), {}, [(1, ((x.clone(),), {})), (2, ((x.clone(),), {}))],
                            lambda a, k: [], lambda: len(calls), fresh=1)
    rot.at = 1
    ms = rot._time_one(None)
    assert (ms, len(calls), queued) == (5.0, 1, [rotation.FRESH_GATE_US])
    assert rot.last[1][0].tolist() == [1.0] * 8  # what that one call returned is what is judged
    with pytest.raises(Fail):  # and the check then sees the miss: 5 ms against 0.1 ms timed
        _check(100.0, [ms * 1e3])
