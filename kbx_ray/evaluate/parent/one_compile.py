"""One compile for the worker and the replay process. Before the correctness stage, the worker's
traced copy names what each case's call will launch (worker/trace_ops.py), the replay process
compiles it holding no GPU lock, and what it wrote to its Triton cache seeds the worker's (the
kernel module keeps Triton's cache keys, static/kernels.py). The candidate's calls then compile
nothing while they hold the GPU, and no kernel is compiled twice. Nothing here is judged: a trace
that fails or misses a kernel leaves the worker to compile it, as before.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable

from kbx_ray.evaluate import program
from kbx_ray.evaluate.parent.case_checks import Fail
from kbx_ray.evaluate.parent.sandbox import WorkerDied
from kbx_ray.evaluate.parent.triton_cache import seed_cache, worker_cache
from kbx_ray.types import ErrorKind, EvalResult, Stage, Task

TRACE_S = 20.0  # the traced copy's time for every case together, at most

# `ev` is the `evaluator.Evaluator` running the evaluation (not imported: it imports this module)
Evaluator = Any


def wanted(ev: Evaluator) -> bool:
    """`evaluation.one_compile`: auto on a GPU (the interpreter compiles nothing), on, off."""
    mode = ev.cfg.one_compile
    if getattr(ev, "untraced", None) == ev.count:  # this evaluation's retry after a failed trace
        return False
    return ev.replay.on and (mode == "on" or (mode == "auto" and ev.device == "cuda"))


Traced = dict[str, tuple[dict, program.Program]]  # case name -> (case, its traced program)


def prewarm(ev: Evaluator, task: Task, cases: list[dict], res: EvalResult) -> Traced:
    """Before the correctness stage: every case traced (a shared GPU hold only while the worker
    draws each case's inputs, `mirror`), the first case's kernels compiled by the replay process
    (under none) and seeded into the worker's cache. Returns the other cases' programs, for
    `warm` once the first case passed: a candidate failing there pays for no other case's
    compiles."""
    if not wanted(ev):
        return {}
    t0 = time.perf_counter()
    left = ev.deadline - t0
    try:
        # the draw only: the copy runs on meta tensors, off the GPU
        with ev.lock.shared("mirror"):
            drawn, _ = ev.sandbox.request({"op": "mirror", "cases": cases, "seed": 1},
                                          min(TRACE_S + 30, left))
        left = ev.deadline - time.perf_counter()
        reply, _ = ev.sandbox.request({"op": "trace", "timeout_s": min(TRACE_S, left)},
                                      min(TRACE_S + 30, left)) if drawn.get("ok") else (drawn, [])
    except WorkerDied as d:  # never the candidate's verdict: one more try, untraced
        ev.untraced = ev.count
        raise Fail(Stage.CORRECTNESS, ErrorKind.INFRA_ERROR, f"the worker failed tracing its "
                   f"launches ({d.msg}); retried without the trace") from None
    _add(res, "w_trace", time.perf_counter() - t0)
    raws = reply.get("programs") if reply.get("ok") else None
    raws = raws if isinstance(raws, list) and len(raws) == len(cases) else [None] * len(cases)
    traced: Traced = {}
    for case, raw in zip(cases, raws):
        try:
            prog = program.parse(raw) if isinstance(raw, dict) and "unsupported" not in raw \
                else None
        except program.ProgramError:
            prog = None
        if prog is None or not prog.launches():
            _add(res, "trace_missed", 1)  # compiled as before: the worker, then the replay
        else:
            traced[case["name"]] = (case, prog)
    first = cases[0]["name"] if cases else ""
    if first in traced:
        warm(ev, task, {first: traced.pop(first)}, res, contextlib.nullcontext)
    return traced


def warm(ev: Evaluator, task: Task, traced: Traced, res: EvalResult,
         released: Callable[[], Any]) -> None:
    """`traced`'s kernels compiled by the replay process in one stretch with the caller's GPU
    hold let go (`released`), then seeded into the worker's cache."""
    if not traced:
        return
    with released():
        for case, prog in traced.values():
            ev.replay.warm(prog, task, case, 1, lambda: ev.deadline - time.perf_counter(),
                           contextlib.nullcontext)
    t0 = time.perf_counter()
    _add(res, "seeded", seed_from_replay(ev))
    _add(res, "seed_s", time.perf_counter() - t0)  # the copy between the two caches


def seed_from_replay(ev: Evaluator) -> int:
    """The replay process's cache entries the worker's cache lacks, copied in; how many files."""
    if not (ev.replay.sandbox.home and ev.sandbox.home):
        return 0
    src, dst = worker_cache(ev.replay.sandbox.home), worker_cache(ev.sandbox.home)
    have = set(os.listdir(dst))
    files: dict[str, bytes] = {}
    for key in os.listdir(src):
        folder = os.path.join(src, key)
        if key in have or os.path.islink(folder) or not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if not name.startswith(".") and os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as fp:
                    files[f"{key}/{name}"] = fp.read()
    try:
        return seed_cache(files, dst)
    except (OSError, ValueError):  # a full disk, an odd name: the worker compiles as before
        return 0


def own_compiles(ev: Evaluator) -> int:
    """Cache entries the worker compiled itself (none the replay process wrote): profiling, the
    kernels its trace missed."""
    if not (wanted(ev) and ev.replay.sandbox.home and ev.sandbox.home):
        return 0
    mine = set(os.listdir(worker_cache(ev.sandbox.home)))
    return len(mine - set(os.listdir(worker_cache(ev.replay.sandbox.home))))


def _add(res: EvalResult, key: str, v: float) -> None:
    res.stage_s[key] = round(res.stage_s.get(key, 0.0) + v, 4)
