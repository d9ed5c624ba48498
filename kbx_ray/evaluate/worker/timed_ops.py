"""The timed requests (`time`, `recheck`): the candidate's timing loop with its buffers rotated
through secret input sets (`rotation.py`), a secret share of the calls watched, and a checked call
on fresh values in the very buffers that were timed. `handlers.Worker` serves them through these
functions (watched with it).
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from kbx_ray.evaluate.common import timing
from kbx_ray.evaluate.common.digest import digest
from kbx_ray.evaluate.reply import RecheckReply, TimedCheck, TimedSample, TimeReply, wire
from kbx_ray.evaluate.worker import host_values, ledger, rotation
from kbx_ray.evaluate.worker.call_checks import refill, scalars
from kbx_ray.evaluate.worker.candidate_errors import (CandidateError, candidate_tb, cuda_suspect,
                                                      error_kind)
from kbx_ray.evaluate.worker.outputs import encode

DEVICE = os.environ.get("KBX_DEVICE", "cpu")

# `w` is the `handlers.Worker` serving the request (not imported: it imports this module)
Worker = Any


def time(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """Time the candidate on one case; its buffers are kept for `recheck`, which the parent asks
    for next, outside the exclusive GPU lock (the check needs no quiet GPU). Between timed
    calls the buffers get the next input set's values (`rotation.py`); the last output of each
    set is kept, and goes back with the recheck for the parent to compare."""
    seeds = [int(s) for s in req.get("seeds") or [req["seed"]]]
    args, kwargs = w._inputs(req["case"], seeds[0])
    sets = [(seeds[0], w._inputs(req["case"], seeds[0]))]
    sets += [(s, p) for s in seeds[1:] for p in [w._inputs(req["case"], s)]
             if rotation.same_layout(p, (args, kwargs), scalars)]
    rot = rotation.Rotation(w.entry, args, kwargs, sets, w._mutated_args,
                            lambda: ledger.MONITOR.launches, int(req.get("fresh", 0)),
                            functools.partial(watched, w))
    side0 = ledger.MONITOR.side_launches
    w.timed_refusal = ""
    try:
        with w._step("bench"):
            t = timing.bench(rot.call, timing.TimingConfig(**req["timing"]), DEVICE, rot.between)
    except CandidateError:
        raise
    except Exception as e:  # noqa: BLE001 - a timed call raised: the candidate's error
        w._check_tampering()
        kind, msg = error_kind(e, DEVICE), candidate_tb(e, "kbx_cand_")
        if w.timed_refusal:  # refused in a watched timed call
            kind, msg = "disqualified", f"a timed call {w.timed_refusal}\n{msg}"
        raise CandidateError(kind, msg, cuda_suspect=cuda_suspect(e)) from None
    if w.timed_refusal:  # refused in a watched timed call, and the candidate caught it
        raise CandidateError("disqualified", f"a timed call {w.timed_refusal}")
    # the timed calls ran unguarded: a patch made only when called often enough shows up here
    w._check_tampering()
    if ledger.MONITOR.side_launches > side0:
        raise CandidateError("disqualified", f"{ledger.MONITOR.side_launches - side0} timed "
                             "launches ran on a non-default CUDA stream: their time escapes "
                             "the timing events")
    with w._step("fresh"):
        kept = rot.samples()  # the fresh sets' calls run here, timed alone
    # the outputs go back with the recheck, outside the exclusive GPU hold; their digests go now,
    # before a later case's calls could rewrite them in this process
    with w._step("digest"):
        digests = tuple(tuple(digest(t) for t in outs) for _, outs in kept)
    w.timed[req["case"]["name"]] = (args, kwargs, kept)
    checked = TimedCheck(calls=rot.calls, launchless=rot.launchless, repeated=rot.repeated,
                         error=rot.error, samples=(), fresh_ms=tuple(rot.fresh_ms),
                         digests=digests)
    return wire(TimeReply(timing=t.to_dict(), timed_check=checked, prof=w._take_prof())), []


def watched(w: Worker, entry: Any, args: tuple, kwargs: dict) -> Any:
    """One timed call under the monitor, as a checked call runs (`Rotation.call` picks a
    secret share of them): torch ops outside the allowlist are refused there too, and the
    first refusal is kept (`timed_refusal`) even if the candidate catches it."""
    ledger.MONITOR.reset((args, kwargs), keep_launches=True)
    host_values.begin()
    marked_args, marked_kwargs = host_values.mark_inputs(args, kwargs)
    ledger.MONITOR.active = True
    try:
        with w.mode, w.values:
            out = entry(*marked_args, **marked_kwargs)
            host_values.check_output(out)
    finally:
        ledger.MONITOR.active = False
        if (ledger.MONITOR.denied or host_values.REFUSED) and not w.timed_refusal:
            ops = sorted(ledger.MONITOR.torch_ops)[:5]
            w.timed_refusal = f"computed with torch ops {ops}"
    return out


def recheck(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """The timed outputs kept by `time`; then fresh values written into the very buffers that were
    just timed, and one checked call:
    a cache keyed by pointer, shape or call count now returns a stale answer, which the parent
    rejects."""
    if req["case"]["name"] not in w.timed:
        raise RuntimeError(f"recheck of case {req['case']['name']!r} without timing it first")
    args, kwargs, kept = w.timed.pop(req["case"]["name"])
    blobs: list[Any] = []
    with w._step("encode"):  # before the checked call, which could otherwise reach them
        samples = tuple(TimedSample(seed=int(seed), outputs=encode(outs, blobs))
                        for seed, outs in kept)
    del kept
    fresh_args, fresh_kwargs = w._inputs(req["case"], req["fresh_seed"])
    if not refill((args, kwargs), (fresh_args, fresh_kwargs)):
        # the seed decides sizes (random sequence lengths): new buffers, so a cache keyed by
        # pointer or shape misses anyway and must recompute
        args, kwargs = fresh_args, fresh_kwargs
    info, returned, mutated = w._call_checked(args, kwargs)
    with w._step("encode"):
        info = dataclasses.replace(info, outputs=encode(returned + mutated, blobs))
    return wire(RecheckReply(check=info, samples=samples, prof=w._take_prof())), blobs
