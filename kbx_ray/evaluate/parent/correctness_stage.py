"""The correctness stage of an evaluation: each case's seeds called, judged live, and replayed
(replay_check.py) beside the next call, the next case's first included, under one shared GPU hold
that steps aside for a waiting writer between calls (gpulock.let_writer_in)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kbx_ray.evaluate.parent import case_checks, one_compile
from kbx_ray.evaluate.parent.admission import give_back_cached
from kbx_ray.evaluate.parent.case_checks import Fail as _Fail
from kbx_ray.evaluate.parent.correctness import Verdict
from kbx_ray.evaluate.parent.replay_check import Pending
from kbx_ray.evaluate.reply import RunReply
from kbx_ray.types import CaseResult, ErrorKind, EvalResult, Stage, Task

# `ev` is the `evaluator.Evaluator` running the evaluation (not imported: it imports this module)
Evaluator = Any


@dataclass
class Carried:
    """A replay in flight and the record of the case it belongs to."""
    pending: Pending
    cr: CaseResult
    settled: bool = False


def check_cases(ev: Evaluator, ref_mod: Any, task: Task, cases: list[dict],
                res: EvalResult) -> None:
    """Every case on its seeds (fresh per case: no case tells another's); the first failing case
    fails the evaluation, a replay's failure before any later call's."""
    carried: Carried | None = None
    own = one_compile.own_compiles(ev)
    later = one_compile.prewarm(ev, task, cases, res)  # each kernel compiled once, unheld
    with ev.lock.shared("c_last"):
        try:
            for i, case in enumerate(cases):
                if i == 1 and later:  # the first case passed: the others' kernels, in one go
                    carried = _settle(ev, carried, ref_mod, task, res)
                    one_compile.warm(ev, task, later, res, lambda: ev.lock.released("c_warm"))
                n = ev.cfg.seeds if case["small"] or task.random or case.get("unseen") else \
                    max(1, ev.cfg.large_seeds)
                seeds = [ev._seed(j) for j in range(n)]
                cr = CaseResult(case=case["name"], seeds=len(seeds))
                carried = _check_case(ev, ref_mod, task, case, seeds, res, cr, carried, i == 0)
                res.cases.append(cr)
                give_back_cached(ev.device)  # hold what is live, not the peak
                if not cr.ok:
                    raise _Fail(Stage.CORRECTNESS, cr.error_kind,
                                f"case {case['name']}: {cr.message}")
        except _Fail:
            _settle(ev, carried, ref_mod, task, res)  # an earlier call's replay fails first
            raise
        _settle(ev, carried, ref_mod, task, res)
    if one_compile.wanted(ev):
        res.stage_s["w_compiled"] = one_compile.own_compiles(ev) - own


def _check_case(ev: Evaluator, ref_mod: Any, task: Task, case: dict, seeds: list[int],
                res: EvalResult, cr: CaseResult, carried: Carried | None,
                first: bool) -> Carried | None:
    """Each seed's call judged live, then its replay, which runs beside the next call: a replay
    is judged before the next call's outputs. Returns the last replay, still in flight."""
    outs_by_seed, strays = [], {}
    for i, seed in enumerate(seeds):  # one seed per request: a reply holds one seed's
        if not (first and i == 0) and ev.lock.step_end("c_seed"):  # ours off the GPU, its turn
            carried = _settle(ev, carried, ref_mod, task, res)
            ev.lock.let_writer_in("c_settle")
        t0 = time.perf_counter()
        try:
            reply, blobs = ev._ask({"op": "run", "case": case, "seeds": [seed],
                                    "repeat": i == 0}, ev.cfg.case_timeout_s,
                                   Stage.COMPILE if first and i == 0 else Stage.CORRECTNESS, res)
        except _Fail:
            carried = _settle(ev, carried, ref_mod, task, res)  # an earlier call's, first
            raise
        res.stage, res.call_ok = Stage.CORRECTNESS, True
        info = case_checks.read(RunReply, reply, "run", res.stage).results[0]
        t1 = time.perf_counter()
        outs = case_checks.decode(info.outputs, blobs, ev.device)
        outs_by_seed.append(outs)
        t2 = time.perf_counter()
        v = (case_checks.integrity(info, ev.cfg.torch_compute, res, ev.monitor)
             or case_checks.repeat_problem(info, outs, blobs, ref_mod, case, ev.device)
             or case_checks.verdict(ev.refs.outputs_for(ref_mod, task, case, seed),
                                    outs, info, ref_mod, case, res,
                                    ev.refs.exact_for(ref_mod, task, case)(seed)))
        v = case_checks.strays_problem(strays, v, outs)  # an unseen case's, never twice
        carried = _settle(ev, carried, ref_mod, task, res)
        got = _replay_send(ev, ref_mod, task, case, seed, info, res) if v.ok else None
        for key, dt in (("worker_run", t1 - t0), ("decode", t2 - t1),
                        ("judge", time.perf_counter() - t2)):
            res.stage_s[key] = round(res.stage_s.get(key, 0.0) + dt, 4)
        cr.max_abs_err = max(cr.max_abs_err, v.max_abs_err)
        cr.max_rel_err = max(cr.max_rel_err, v.max_rel_err)
        failed = v if not v.ok else got if isinstance(got, Verdict) else None
        if failed:
            cr.error_kind, cr.message = failed.kind, f"seed {seed}: {failed.message}"
            return None
        carried = Carried(got, cr) if isinstance(got, Pending) else None
    if task.random and len(outs_by_seed) > 1:
        why = case_checks.seed_problem(outs_by_seed)
        if why:
            cr.error_kind, cr.message = ErrorKind.MISMATCH, why
            return _settle(ev, carried, ref_mod, task, res)  # its own replay's failure first
    cr.ok = True  # until its last replay, still in flight, says otherwise
    return carried


def _replay_send(ev: Evaluator, ref_mod: Any, task: Task, case: dict, seed: int, info: Any,
                 res: EvalResult) -> Any:
    t0 = time.perf_counter()
    got = ev.replay.submit(ev.refs, ref_mod, task, case, seed, info,
                           lambda: ev.deadline - time.perf_counter(), ev.lock.released)
    res.stage_s["replay"] = round(res.stage_s.get("replay", 0.0) + time.perf_counter() - t0, 4)
    return got


def _settle(ev: Evaluator, carried: Carried | None, ref_mod: Any, task: Task,
            res: EvalResult) -> None:
    """The replay in flight judged: when it fails, its case fails (its record says why) and the
    evaluation with it. Always None: nothing is in flight after it."""
    if carried is None or carried.settled:
        return None
    carried.settled = True
    t0 = time.perf_counter()
    v = ev.replay.collect(carried.pending, ev.refs, ref_mod, task)
    res.stage_s["replay"] = round(res.stage_s.get("replay", 0.0) + time.perf_counter() - t0, 4)
    if v:
        cr = carried.cr
        cr.ok, cr.error_kind = False, v.kind
        cr.message = f"seed {carried.pending.seed}: {v.message}"
        raise _Fail(Stage.CORRECTNESS, cr.error_kind, f"case {cr.case}: {cr.message}")
    return None
