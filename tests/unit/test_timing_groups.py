"""Timed cases share one exclusive GPU hold while their buffers fit `timing_group_mb` together."""
from __future__ import annotations

from kbx_ray.evaluate.parent.timing_judgement import timing_groups


class _Ref:
    @staticmethod
    def cost(case: dict) -> dict:
        return {"flops": 0, "bytes": case["mb"] * 2**20}


def _groups(mbs: list[int], limit: int, kept: int = 0) -> list[list[str]]:
    timed = [({"name": f"c{i}", "mb": mb}, None) for i, mb in enumerate(mbs)]
    return [[c["name"] for c, _ in g] for g in timing_groups(_Ref, timed, limit, kept)]


def test_cases_that_fit_share_one_hold():
    assert _groups([100, 200, 300, 400], 8192) == [["c0", "c1", "c2", "c3"]]


def test_groups_close_when_the_next_case_does_not_fit():
    assert _groups([3000, 3000, 3000, 100], 8192) == [["c0", "c1"], ["c2", "c3"]]


def test_a_case_bigger_than_the_limit_is_held_alone():
    assert _groups([10000, 50, 9000], 8192) == [["c0"], ["c1"], ["c2"]]
    assert _groups([], 8192) == []


def test_the_outputs_kept_for_the_recheck_count_against_the_limit():
    """Each timed case's kept outputs (one per timing and fresh input set) stay in the worker
    until its recheck: four sets make a 1000 MB case hold 5000 MB."""
    assert _groups([1000, 1000, 1000], 8192) == [["c0", "c1", "c2"]]
    assert _groups([1000, 1000, 1000], 8192, kept=4) == [["c0"], ["c1"], ["c2"]]
    assert _groups([100] * 4, 8192, kept=4) == [["c0", "c1", "c2", "c3"]]
