"""Checked timed calls: the timed buffers get another input set's values between calls.

A candidate called hundreds of times on the same buffers can recognise them (pointer, shape, call
count) and hand back its previous output instead of computing. Between two timed calls, outside
the timed window (`timing.bench`'s `between`), this writes the next of a few input sets, drawn
from secret seeds, into the very buffers that are timed, keeps each set's last output alive and
notes, for each call, whether it launched a Triton kernel and whether it returned an object it had
returned before (with the old outputs alive the allocator cannot hand back their memory, so a
shared storage is a cache). The last output of each set goes back to the parent, which compares
it with the reference for that set's seed. Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from kbx_ray.evaluate.trees import tensors  # the one walk (the worker's `rotation.tensors`)


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
                 launches: Callable[[], int]) -> None:
        self.entry, self.args, self.kwargs = entry, args, kwargs
        self.sets = sets                  # (seed, (args, kwargs)) pristine values, set 0 first
        self.mutated = mutated            # the declared-mutated arguments of a call
        self.launches = launches          # the worker's running count of Triton launches
        self.inputs = tensors((args, kwargs))
        self.at = 0                       # which set's values the buffers hold now
        self.out: Any = None
        self.mark = launches()
        self.calls = self.launchless = self.repeated = 0
        self.last: dict[int, list[torch.Tensor]] = {}  # set -> its last call's outputs
        self.error = ""

    def call(self) -> None:
        self.out = self.entry(*self.args, **self.kwargs)

    def between(self) -> None:
        out, self.out = self.out, None
        self.calls += 1
        now = self.launches()
        if now == self.mark:
            self.launchless += 1
        self.mark = now
        returned = tensors(out) if isinstance(out, (torch.Tensor, list, tuple)) else []
        if out is not None and not returned:
            self.error = f"a timed call returned {type(out).__name__}"
        # an output that is an input (an in-place task returning its argument) is the same buffer
        # every call by right; the buffers are refilled next, so keep a copy of what it holds
        inp = [any(overlaps(t, i) for i in self.inputs) for t in returned]
        if any(overlaps(t, h) for t, is_in in zip(returned, inp) if not is_in
               for held in self.last.values() for h in held):
            self.repeated += 1
        self.last[self.at] = [t.clone() if is_in else t for t, is_in in zip(returned, inp)] + [
            m.clone() for m in self.mutated(self.args, self.kwargs)]
        self.at = (self.at + 1) % len(self.sets)
        for dst, src in zip(self.inputs, tensors(self.sets[self.at][1])):
            dst.copy_(src)

    def samples(self) -> list[tuple[int, list[torch.Tensor]]]:
        """(seed, outputs) of the last timed call on each set (returned, then mutated)."""
        return [(self.sets[k][0], outs) for k, outs in sorted(self.last.items())]
