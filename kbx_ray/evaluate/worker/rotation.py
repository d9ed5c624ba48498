"""Checked timed calls: the timed buffers get another input set's values between calls.
More: kbx_ray/evaluate/worker/README.md, `rotation.py`.
"""
from __future__ import annotations

import random
import secrets
from typing import Any, Callable

import torch

from kbx_ray.evaluate.common import timing
from kbx_ray.evaluate.worker.ledger import MONITOR  # `movement`: the task only moves data
from kbx_ray.evaluate.common.trees import tensors  # the one walk (the worker's `rotation.tensors`)

WATCH_SHARE = 1 / 8  # timed calls run watched (a few slower samples: the median holds)
FRESH_GATE_US = 20_000.0  # the spin before a fresh call (one that outruns it waits on the host inside)


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaNs in the same places."""
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def same_layout(a: Any, b: Any, scalars: Callable[[Any], list]) -> bool:
    """Whether `b`'s values can be written into `a`'s buffers (same tensors, same scalars)."""
    x, y = tensors(a), tensors(b)
    return len(x) == len(y) and scalars(a) == scalars(b) and all(
        p.shape == q.shape and p.dtype == q.dtype and p.stride() == q.stride()
        for p, q in zip(x, y))


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share a storage (empty tensors share nothing)."""
    return (a.numel() > 0 and b.numel() > 0
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


class Rotation:
    """`call` is what the timed window holds (the call and one store); `between` does the rest."""

    def __init__(self, entry: Callable[..., Any], args: tuple, kwargs: dict,
                 sets: list[tuple[int, tuple]], mutated: Callable[[tuple, dict], list],
                 launches: Callable[[], int], fresh: int = 0,
                 watch: Callable[[Callable, tuple, dict], Any] | None = None) -> None:
        self.entry, self.args, self.kwargs = entry, args, kwargs
        self.sets = sets                  # (seed, (args, kwargs)) pristine values, set 0 first
        self.rotated = max(1, len(sets) - max(0, fresh))  # the first ones rotate; the rest: fresh
        self.fresh_ms: list[float | None] = []  # each fresh call's time
        self.fresh_done = False
        self.mutated = mutated            # the declared-mutated arguments of a call
        self.launches = launches          # the worker's running count of Triton launches
        self.inputs = tensors((args, kwargs))
        self.at = 0                       # which set's values the buffers hold now
        self.out: Any = None
        self.mark = launches()
        self.calls = self.launchless = self.repeated = 0
        self.last: dict[int, list[torch.Tensor]] = {}  # set -> its last call's outputs
        self.identity: dict[int, list[torch.Tensor]] = {}  # set -> a launchless copy it returned
        self.error = ""
        # a secret share of the timed calls runs under the monitor, as a checked call does: a
        # candidate cannot tell which, so it cannot compute with torch only when unwatched
        self.watch = watch
        self.watched = 0
        self._draw = random.Random(secrets.randbits(64))

    def call(self) -> None:
        if self.watch is not None and not self.fresh_done and self._draw.random() < WATCH_SHARE:
            self.watched += 1
            self.out = self.watch(self.entry, self.args, self.kwargs)
            return
        self.out = self.entry(*self.args, **self.kwargs)

    def between(self) -> None:
        self._note()
        self.at = (self.at + 1) % self.rotated
        self._load(self.at)

    def _load(self, k: int) -> None:
        for dst, src in zip(self.inputs, tensors(self.sets[k][1])):
            dst.copy_(src)

    def _note(self) -> None:
        out, self.out = self.out, None
        self.calls += 1
        now = self.launches()
        launched, self.mark = now != self.mark, now
        returned = tensors(out) if isinstance(out, (torch.Tensor, list, tuple)) else []
        if not launched:
            owed = self._owes_launch(returned)
            self.launchless += owed
            if not owed and self.at not in self.identity:  # one such output per set is judged
                self.identity[self.at] = [t.clone() for t in returned] + [
                    m.clone() for m in self.mutated(self.args, self.kwargs)]
        if out is not None and not returned:
            self.error = f"a timed call returned {type(out).__name__}"
        # an output that is an input (an in-place task returning its argument) is the same buffer
        # every call by right; the buffers are refilled next, so keep a copy of what it holds
        inp = [any(overlaps(t, i) for i in self.inputs) for t in returned]
        if any(overlaps(t, h) for t, is_in in zip(returned, inp) if not is_in
               for held in self.last.values() for h in held):
            self.repeated += 1
        # a fresh call is timed alone, so it is judged on what it returned when it returned: a
        # copy, queued behind the call (the next call may not finish an output this one left
        # unwritten: c6f_deferred_miss_relu). A copy in place of the object: the fresh calls
        # are judged by value (each set's values are new), so none need be kept from the allocator
        fresh = self.at >= self.rotated
        self.last[self.at] = [t.clone() if is_in or fresh else t
                              for t, is_in in zip(returned, inp)] + [
            m.clone() for m in self.mutated(self.args, self.kwargs)]

    def _owes_launch(self, returned: list[torch.Tensor]) -> bool:
        """A launchless call is fine only when every output is empty (an early return, a zero
        grid) or, off data-movement tasks, a copy of one of this set's pristine inputs, value for
        value (the identity answer, e.g. floor of integers; a copy of one set's values is the
        same for every call on it, so one sample per set is compared with the reference)."""
        if any(m.numel() for m in self.mutated(self.args, self.kwargs)):
            return True
        pristine = tensors(self.sets[self.at][1])
        return not all(t.numel() == 0 or (not MONITOR.movement and not any(
            overlaps(t, i) for i in self.inputs) and any(
            p.shape == t.shape and p.dtype == t.dtype and _equal(p, t) for p in pristine))
            for t in returned)

    def run_fresh(self) -> None:
        """Each fresh set once, timed alone (on a GPU; on the host clock otherwise), after the
        timed loop; its output is kept with the rotated sets' for the parent's comparison."""
        if self.fresh_done:
            return
        self.fresh_done = True
        # what the timed calls returned, as they returned it: a later call may not settle what
        # they owe into the tensors they handed back (c6f_settle_at_fresh_matmul). The objects are
        # let go: a fresh call handing one back holds the rotated set's values, not its own
        self.last = {k: [t.clone() for t in outs] for k, outs in self.last.items()}
        cuda = any(t.is_cuda for t in self.inputs)
        flush = timing._flush_buffer(256) if cuda else None
        for k in range(self.rotated, len(self.sets)):
            self.at = k
            self._load(k)
            self.fresh_ms.append(self._time_one(flush) if cuda else self._time_host())

    def _time_one(self, flush: Any) -> float:
        """One call behind a spin long enough for the host to queue it (the timed loop's gate),
        and only one: a fresh set is new content once. A call that waits on the host inside
        (`.item()`) never queues behind the gate; its events still bracket it on the stream, its
        waits included, as the timed calls' events held theirs. Calling the set again (a longer
        gate, then the host clock, as before) timed and judged a second call on content the first
        had already seen: on the H100 a content cache that defers its first miss
        (c6f_deferred_miss_relu) was judged on the second call's output and timed on a hit."""
        torch.cuda.synchronize()
        pairs, _, _, _ = timing._queue(self.call, flush, 1, FRESH_GATE_US, None, self._note)
        start, end = pairs[0]
        end.synchronize()
        return start.elapsed_time(end)

    def _time_host(self) -> float:
        """One call on the host clock (the CPU: no events)."""
        import time

        t = time.perf_counter()
        self.call()
        ms = (time.perf_counter() - t) * 1e3
        self._note()
        return ms

    def samples(self) -> list[tuple[int, list[torch.Tensor]]]:
        """(seed, outputs) of the last timed call on each set (returned, then mutated), the fresh
        sets' included (they are called here if they were not yet)."""
        self.run_fresh()
        return [(self.sets[k][0], outs) for k, outs in sorted(self.last.items())] + [
            (self.sets[k][0], outs) for k, outs in sorted(self.identity.items())]
