"""The worker's timing of one case -> the parent's judgement: believable or not, and what it gives.

The parent distrusts the worker's figures: the event times must fit in the wall clock it measured
itself, calls on never-seen inputs must cost what timed ones cost, no GPU work may trail the call
(side streams), and no case may beat the hardware's peak. What passes becomes the case's speedup
over the eager reference and its roofline figures.
More: kbx_ray/evaluate/parent/README.md, `timing_judgement.py`.
"""
from __future__ import annotations

from typing import Any

from kbx_ray.evaluate.reply import ReplyError, TimedCheck, parse
from kbx_ray.evaluate.common import timing as timing_mod
from kbx_ray.evaluate.parent.case_checks import Fail
from kbx_ray.evaluate.parent.roofline import floor_fraction, roofline
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.types import CaseResult, ErrorKind, EvalResult, Stage


def timing_groups(ref_mod: Any, timed: list[tuple], limit_mb: float,
                  kept: int = 0) -> list[list[tuple]]:
    """Consecutive timed cases whose held memory fits `limit_mb` (`timing_group_mb`) together:
    the worker keeps each timed case's buffers, and the outputs of its `kept` input sets (sized
    as the case's inputs and outputs: an upper bound), until its post-timing check."""
    groups: list[list[tuple]] = []
    room = 0.0
    for item in timed:
        mb = (ref_mod.cost(item[0]).get("bytes") or 0) / 2**20 * (1 + max(0, kept))
        if not groups or mb > room:
            groups.append([])
            room = float(limit_mb)
        groups[-1].append(item)
        room -= mb
    return groups


def timing_record(raw: Any) -> timing_mod.Timing:
    """The worker's `Timing.to_dict()` parsed strictly (`reply.parse`: every field, none unknown,
    each typed; the per-call times stay in the worker); a malformed one is `infra_error`."""
    try:
        return parse(timing_mod.Timing, raw, "time.timing", omitted=("times_ms",))
    except ReplyError as e:
        raise Fail(Stage.TIMING, ErrorKind.INFRA_ERROR,
                   "no verdict can be given: the worker's time reply "
                   f"is malformed ({e})") from None


def check_fresh_calls(case: dict, t: timing_mod.Timing, checked: TimedCheck, fresh_ratio: float,
                      device: str, floor_us: float = 100.0) -> None:
    """A call on inputs never seen before costs what a timed call costs. A cache keyed by the
    inputs' content hits on every rotated set after its first visit and misses here, where it
    must compute (rotation.py); its outputs were compared with the reference already.

    The bound is max(fresh_ratio x median, median + floor_us) (`fresh_floor_us`): a call timed
    alone pays its host launch path and cold caches, tens of microseconds that a kernel of a few
    microseconds cannot hide (logspace: 4 us timed, 45 us on its first fresh call). A content
    cache's miss computes the whole case, far above that on the cases where it gains anything."""
    times = [x for x in checked.fresh_ms if x is not None]
    if not times or t.median_ms <= 0:
        return
    # on the CPU (`cpu_timing`, tests of the protocol) the host clock of a loaded box is noisy
    ratio = fresh_ratio if device == "cuda" else max(10.0, fresh_ratio)
    bound = max(ratio * t.median_ms, t.median_ms + floor_us / 1e3) + 0.02
    if min(times) > bound:
        raise Fail(Stage.TIMING, ErrorKind.TIMING_INVALID,
                   f"case {case['name']}: calls on inputs never "
                   f"seen before took {min(times):.3f} ms, against {t.median_ms:.3f} ms "
                   f"on the timed ones, over the bound {bound:.3f} ms (results cached by the "
                   "inputs' content?)")


def judge_timing(cfg: EvalConfig, device: str, case: dict, cr: CaseResult, res: EvalResult,
                 t: timing_mod.Timing, parent_wall_ms: float, ref_t: timing_mod.Timing,
                 checked: TimedCheck, ref_mod: Any, dtype: str) -> None:
    """The timing's own checks, then its figures onto `cr` (speedup, GB/s, TFLOP/s, SOL)."""
    if t.event_sum_ms > min(t.wall_s * 1e3, parent_wall_ms) * 1.02 + 1.0:
        raise Fail(Stage.TIMING, ErrorKind.TIMING_INVALID,
                   f"case {case['name']}: the reported event times "
                   f"({t.event_sum_ms:.1f} ms) exceed the wall clock ({parent_wall_ms:.1f} ms)")
    check_fresh_calls(case, t, checked, cfg.fresh_ratio, device, cfg.fresh_floor_us)
    if timing_mod.side_stream_suspect(t):
        raise Fail(Stage.TIMING, ErrorKind.DISQUALIFIED,
                   f"case {case['name']}: {t.sync_tail_ms:.3f} ms "
                   f"of GPU work after the call returned vs {t.median_ms:.3f} ms by events "
                   "(side-stream work?)")
    if t.feed == "host_bound":  # a call that syncs inside: its waits are in its times
        res.flags.append(f"timing_host_bound:{case['name']}")
    if ref_t.feed == "host_bound":  # the eager reference's own (its speedup is then generous)
        res.flags.append(f"timing_host_bound_ref:{case['name']}")
    cr.cand_ms, cr.cand_p20_ms, cr.cand_p80_ms = t.median_ms, t.p20_ms, t.p80_ms
    cr.cand_reps, cr.ref_ms, cr.ref_reps = t.reps, ref_t.median_ms, ref_t.reps
    cr.speedup = ref_t.median_ms / t.median_ms if t.median_ms > 0 else None
    peak = cfg.peak_tflops.get(dtype, 0.0)
    cost = ref_mod.cost(case)
    cr.gbps, cr.tflops, cr.sol_fraction = roofline(cost, t.median_ms, cfg.peak_gbps, peak)
    floor = floor_fraction(cost, t.median_ms, cfg.peak_gbps, peak)  # min_bytes/min_flops
    if floor and floor > cfg.sol_limit:
        raise Fail(Stage.TIMING, ErrorKind.TIMING_INVALID, f"case {case['name']}: {floor:.0%} of "
                   "the hardware's peak is physically impossible")
