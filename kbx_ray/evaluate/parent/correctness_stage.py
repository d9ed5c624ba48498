"""The correctness stage of an evaluation: each case's seeds called, judged live, and replayed
(replay_check.py) beside the next seed's call, under one shared GPU hold per case."""
from __future__ import annotations

import time
from typing import Any

from kbx_ray.evaluate.parent import case_checks
from kbx_ray.evaluate.parent.case_checks import Fail as _Fail
from kbx_ray.evaluate.parent.correctness import Verdict
from kbx_ray.evaluate.parent.replay_check import Pending
from kbx_ray.evaluate.reply import RunReply
from kbx_ray.types import CaseResult, ErrorKind, EvalResult, Stage, Task

# `ev` is the `evaluator.Evaluator` running the evaluation (not imported: it imports this module)
Evaluator = Any


def check_cases(ev: Evaluator, ref_mod: Any, task: Task, cases: list[dict],
                res: EvalResult) -> None:
    """Every case on its seeds (fresh per case: no case tells another's); the first failing case
    fails the evaluation."""
    for i, case in enumerate(cases):
        n = ev.cfg.seeds if case["small"] or task.random or case.get("unseen") else \
            max(1, ev.cfg.large_seeds)
        seeds = [ev._seed(j) for j in range(n)]
        cr = _check_case(ev, ref_mod, task, case, seeds, res, first=i == 0)
        res.cases.append(cr)
        if not cr.ok:
            raise _Fail(Stage.CORRECTNESS, cr.error_kind, f"case {case['name']}: {cr.message}")


def _check_case(ev: Evaluator, ref_mod: Any, task: Task, case: dict, seeds: list[int],
                res: EvalResult, first: bool) -> CaseResult:
    """Each seed's call judged live, then its replay, which runs beside the next seed's call
    (one GPU hold for the case): a seed's replay is judged before the next seed's outputs."""
    cr = CaseResult(case=case["name"], seeds=len(seeds))
    outs_by_seed, strays, pending = [], {}, None
    with ev.lock.shared():
        try:
            for i, seed in enumerate(seeds):  # one seed per request: a reply holds one seed's
                if i and ev.lock.writer_waiting():  # our replay off the GPU, then its turn
                    failed, pending = _settle(ev, pending, ref_mod, task, res), None
                    if failed:
                        break
                    ev.lock.let_writer_in()
                t0 = time.perf_counter()
                reply, blobs = ev._ask({"op": "run", "case": case, "seeds": [seed],
                                        "repeat": i == 0}, ev.cfg.case_timeout_s,
                                       Stage.COMPILE if first and i == 0
                                       else Stage.CORRECTNESS, res)
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
                earlier, pending = _settle(ev, pending, ref_mod, task, res), None
                if v.ok and not earlier:
                    pending = _replay_send(ev, ref_mod, task, case, seed, info, res)
                for key, dt in (("worker_run", t1 - t0), ("decode", t2 - t1),
                                ("judge", time.perf_counter() - t2)):
                    res.stage_s[key] = round(res.stage_s.get(key, 0.0) + dt, 4)
                failed = earlier or (None if v.ok else (seed, v)) or (
                    (seed, pending) if isinstance(pending, Verdict) else None)
                cr.max_abs_err = max(cr.max_abs_err, v.max_abs_err)
                cr.max_rel_err = max(cr.max_rel_err, v.max_rel_err)
                if failed:
                    break
            else:
                failed = _settle(ev, pending, ref_mod, task, res)
        except _Fail:
            failed = _settle(ev, pending, ref_mod, task, res)  # an earlier seed's, first
            if not failed:
                raise
    if failed:
        cr.error_kind, cr.message = failed[1].kind, f"seed {failed[0]}: {failed[1].message}"
        return cr
    if task.random and len(outs_by_seed) > 1:
        why = case_checks.seed_problem(outs_by_seed)
        if why:
            cr.error_kind, cr.message = ErrorKind.MISMATCH, why
            return cr
    cr.ok = True
    return cr

def _replay_send(ev: Evaluator, ref_mod: Any, task: Task, case: dict, seed: int, info: Any,
                 res: EvalResult) -> Any:
    t0 = time.perf_counter()
    got = ev.replay.submit(ev.refs, ref_mod, task, case, seed, info,
                             lambda: ev.deadline - time.perf_counter())
    res.stage_s["replay"] = round(res.stage_s.get("replay", 0.0) + time.perf_counter() - t0, 4)
    return got

def _settle(ev: Evaluator, pending: Any, ref_mod: Any, task: Task,
            res: EvalResult) -> tuple[int, Verdict] | None:
    """(seed, failing verdict) of a replay in flight; None when it agrees or none is."""
    if not isinstance(pending, Pending):
        return None
    t0 = time.perf_counter()
    v = ev.replay.collect(pending, ev.refs, ref_mod, task)
    res.stage_s["replay"] = round(res.stage_s.get("replay", 0.0) + time.perf_counter() - t0, 4)
    return (pending.seed, v) if v else None
