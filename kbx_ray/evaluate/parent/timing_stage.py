"""The timing stage of an evaluation: the timed cases' loops, the timed calls' outputs, a fresh
recheck, the timing judgement, and the replayed program's own time (replay_check.Replay.timing)."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict
from typing import Any

from kbx_ray.evaluate.parent import case_checks
from kbx_ray.evaluate.parent.admission import give_back_cached
from kbx_ray.evaluate.parent.case_checks import Fail as _Fail
from kbx_ray.evaluate.parent.correctness import Verdict
from kbx_ray.evaluate.parent.timing_judgement import judge_timing, timing_groups, timing_record
from kbx_ray.evaluate.reply import RecheckReply, TimedCheck, TimeReply
from kbx_ray.records.metrics import geomean
from kbx_ray.types import CaseResult, EvalResult, Stage, Task

# `ev` is the `evaluator.Evaluator` running the evaluation (not imported: it imports this module)
Evaluator = Any


def time_cases(ev: Evaluator, ref_mod: Any, task: Task, cases: list[dict],
               res: EvalResult) -> None:
    """Each timed case's loops under one exclusive GPU hold per group, then its checks; the
    evaluation's speedup and fraction of peak (geometric means over the timed cases)."""
    res.stage = Stage.TIMING
    timed = [(c, cr) for c, cr in zip(cases, res.cases) if ev._timed(c, cases)]
    # consecutive timed cases that share one exclusive GPU hold (`timing_group_mb`)
    kept = ev.cfg.timed_sets  # outputs held to the recheck
    for group in timing_groups(ref_mod, timed, ev.cfg.timing_group_mb, kept):
        # One exclusive hold per group: each hold first waits for every evaluator's shared work
        # in flight (a compile can take seconds), so one per case would idle the GPU that often.
        with ev.lock.exclusive():
            measured = [_time_case(ev, ref_mod, task, case, res) for case, _ in group]
        for (case, cr), m in zip(group, measured):
            _check_timed_case(ev, ref_mod, task, case, cr, res, *m)
        give_back_cached(ev.device)  # hold what is live, not the group's peak
    timed_speedups = [c.speedup for c in res.cases if c.speedup]
    if timed_speedups:
        res.speedup = geomean(timed_speedups)
    sols = [c.sol_fraction for c in res.cases if c.sol_fraction]
    if sols:
        res.sol_fraction = geomean(sols)


def _time_case(ev: Evaluator, ref_mod: Any, task: Task, case: dict,
               res: EvalResult) -> tuple[Any, float, Any, TimedCheck, Any]:
    """The candidate's and the reference's timing loops (the caller holds the GPU alone)."""
    fresh = max(0, ev.cfg.fresh_sets)
    seeds = [ev._seed(i) for i in range(ev.cfg.timed_sets)]
    asked = time.perf_counter()
    reply, _ = ev._ask({"op": "time", "case": case, "seed": seeds[0], "seeds": seeds,
                        "fresh": fresh, "timing": asdict(ev.cfg.timing)},
                       ev.cfg.case_timeout_s + 4 * ev.cfg.timing.budget_s, Stage.TIMING)
    parent_wall_ms = (time.perf_counter() - asked) * 1e3  # our clock, not the worker's word
    ref_t = ev.refs.timing(ref_mod, task, case, ev.sandbox.info.get("gpu_name"))
    t1 = time.perf_counter()
    timed = case_checks.read(TimeReply, reply, "time", Stage.TIMING)
    t = timing_record(timed.timing)
    for k, v in timed.prof.items():  # the worker's own account: profiling only
        if isinstance(v, (int, float)):
            _add(res, f"tw_{k}", float(v))
    program_t = ev.replay.time_program(task, case, t.median_ms, asdict(ev.cfg.timing),
                                       lambda: ev.deadline - time.perf_counter())
    _add(res, "t_loop", parent_wall_ms / 1e3)
    _add(res, "t_ref", t1 - asked - parent_wall_ms / 1e3)
    _add(res, "t_replay", time.perf_counter() - t1)
    return (t, parent_wall_ms, ref_t, timed.timed_check, program_t)


def _check_timed_case(ev: Evaluator, ref_mod: Any, task: Task, case: dict, cr: CaseResult,
                      res: EvalResult, t: dict, parent_wall_ms: float, ref_t: Any,
                      checked: TimedCheck, program_t: Any) -> None:
    """The timed calls' counts, a fresh recheck (GPU shared) that also brings their outputs back,
    those outputs, the recheck's, then the timing checks."""
    fresh, t0 = ev._seed(len(ev.seeds)), time.perf_counter()
    # steps aside for a waiting writer between its steps (none in flight)
    with ev.lock.shared("t_verdict"):
        case_checks.timed_counts(case, checked)
        t1 = time.perf_counter()
        reply, blobs = ev._ask({"op": "recheck", "case": case, "fresh_seed": fresh},
                               ev.cfg.case_timeout_s, Stage.TIMING, res)
        _add(res, "t_recheck", time.perf_counter() - t1)
        rr = case_checks.read(RecheckReply, reply, "recheck", Stage.TIMING)
        n = sum(len(s.outputs) for s in rr.samples)  # the timed outputs' blobs come first
        ev.lock.let_writer_in("t_recheck")
        t1 = time.perf_counter()
        timed_outs = case_checks.check_timed_calls(
            case, dataclasses.replace(checked, samples=rr.samples), blobs[:n], ev.device, ref_mod,
            lambda s: ev.refs.outputs_for(ref_mod, task, case, s),
            ev.refs.exact_for(ref_mod, task, case))
        _add(res, "t_samples", time.perf_counter() - t1)
        ev.lock.let_writer_in("t_samples")
        check = rr.check
        outs = case_checks.decode(check.outputs, blobs[n:], ev.device)
        v = (case_checks.integrity(check, ev.cfg.torch_compute, res, ev.monitor)
             or _recheck_verdict(ev, ref_mod, task, case, fresh, outs, check, res))
    if not v.ok:
        raise _Fail(Stage.TIMING, v.kind, case_checks.timed_mismatch(
            f"case {case['name']}, its call on fresh values after timing", v, outs, timed_outs))
    judge_timing(ev.cfg, ev.device, case, cr, res, t, parent_wall_ms, ref_t, checked,
                 ref_mod, ev.refs.dtype(task, case))
    ev.replay.judge_timing(case, cr, t.median_ms, program_t)
    _add(res, "t_checks", time.perf_counter() - t0)


def _recheck_verdict(ev: Evaluator, ref_mod: Any, task: Task, case: dict, seed: int, outs: list,
                     info: Any, res: EvalResult) -> Verdict:
    """The recheck's live outputs, then the replay of its kernel program (replay_check.py)."""
    v = case_checks.verdict(ev.refs.outputs_for(ref_mod, task, case, seed), outs, info,
                            ref_mod, case, res, ev.refs.exact_for(ref_mod, task, case)(seed))
    t0 = time.perf_counter()
    v = (ev.replay.verdict(ev.refs, ref_mod, task, case, seed, info,
                           lambda: ev.deadline - time.perf_counter()) or v) if v.ok else v
    _add(res, "replay", time.perf_counter() - t0)
    return v


def _add(res: EvalResult, key: str, dt: float) -> None:
    res.stage_s[key] = round(res.stage_s.get(key, 0.0) + dt, 4)
