"""The storage ledger: what the candidate's host code did during one checked call.

Fed by the dispatch monitor (every aten op, `dispatch_monitor.py`), the value readers (host reads
that dispatch nothing) and the launch counter (`triton_hooks.py`). Inputs are tainted, taint
follows ops and launches, any computing op on tainted data is torch compute, and only Triton
kernels may write the values of an output or of a declared-mutated input (INTEGRITY.md, classes
3 and 4). Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

import inspect
import sys
from typing import Any

from kbx_ray.evaluate.common.trees import tensors
from kbx_ray.evaluate.worker import copy_rules
from kbx_ray.evaluate.worker.aten_ops import (ALLOC, CONST_FILLS, EXACT_MOVES, LIFTS, META, READS,
                                              VIEWS)
from kbx_ray.evaluate.worker.frames import trial
from kbx_ray.evaluate.worker.storages import layout, one_value, ptr


class Monitor:
    """What the candidate's host code did while `active`: Triton launches, and a ledger of storages.

    `tainted` storages hold values derived from the inputs (inputs, and anything an op or a launch
    made from them); `written` maps a storage to the torch op that last wrote values into it;
    `fresh` storages came from an allocation of constants. `torch_ops` collects the findings: a
    computing op on input data, a host read of input data, and (at `finish`) an output or a
    declared-mutated input whose values a torch op wrote instead of a Triton kernel.
    """

    def __init__(self) -> None:
        self.active = False
        self.paused = 0
        self.launches = 0
        self.side_launches = 0            # launches on a non-default CUDA stream (never reset)
        self.torch_ops: set[str] = set()
        self.spans: list[tuple[int, int]] = []   # byte ranges of the current launch's tensors
        self.tainted: set[int] = set()
        self.written: dict[int, str] = {}
        self.fresh: set[int] = set()
        self.passed: set[tuple] = set()   # the input tensors exactly as the call received them
        self.scalars: set[int] = set()    # inputs whose whole storage is one value
        self.by_kernel: set[int] = set()  # fresh allocations a launch was handed (its results)
        self.trials: set[int] = set()     # ... by the autotuner's trial launches only
        self.sizes_read = 0               # one-value kernel results read (output sizes)
        self.movement = False             # the task only moves data (its cost has no flops)
        self.meta: set[int] = set()       # metadata tensors: torch.tensor of Python values, and
                                          # integer compute over them only (never kernel-handed)
        self.moved: set[int] = set()      # lossless copies of inputs (or of such copies)
        self.identity: set[int] = set()   # exact whole copies of an input as the call received it
        self.deny = True                  # raise on a refused op (evaluation.torch_compute=fail)
        self.denied = False               # an op was refused during this call
        self.launch_free = False          # (at finish) every output is empty or an identity copy
        self.structure_at: tuple[tuple[int, str], ...] = ()  # the task's STRUCTURE parameters
        self.structure: set[int] = set()  # their storages, and what torch computed from them only

    def reset(self, inputs: tuple = (), keep_launches: bool = False) -> None:
        """A new checked call on `inputs`; a watched timed call keeps the running launch count
        (the timed loop's launch check reads it)."""
        if not keep_launches:
            self.launches = 0
        self.torch_ops = set()
        self.written, self.fresh = {}, set()
        ts = tensors(inputs, wrapped=True)
        self.tainted = {p for p in map(ptr, ts) if p}
        self.passed = {layout(t) for t in ts}
        self.scalars = {ptr(t) for t in ts if one_value(t)}  # scalar parameters as tensors
        self.by_kernel, self.trials, self.sizes_read = set(), set(), 0
        self.meta, self.moved, self.identity = set(), set(), set()
        self.denied = self.launch_free = False
        args, kwargs = inputs if len(inputs) == 2 and isinstance(inputs[1], dict) else ((), {})
        self.structure = {p for i, n in self.structure_at for p in map(ptr, tensors(kwargs.get(
            n, args[i] if i < len(args) else None), wrapped=True)) if p}

    def watching(self) -> bool:
        return self.active and not self.paused

    def op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Account one aten op the candidate's code dispatched; refuse one outside the allowlist
        (default deny: `_deny` records it and, with `deny` set, raises `DeniedOp`)."""
        full = str(getattr(func, "__name__", func))
        name = full.split(".")[0]
        if name in VIEWS or name in META:
            return
        operands = tensors((args, kwargs), wrapped=True)
        results = tensors(out, wrapped=True)
        if name in ALLOC:
            for p in map(ptr, results):
                self._forget(p)
                self.fresh.add(p)
            return
        hot = any(p in self.tainted for p in map(ptr, operands))
        if name in READS:
            if hot and not all(self._may_read(t) for t in operands):
                self.torch_ops.add(f"{name} read input values on the host")
            return
        if name in LIFTS:  # torch.tensor / as_tensor of Python values: a metadata tensor
            for p in filter(None, map(ptr, results)):
                self._forget(p)
                self.meta.add(p)
            return
        if full in CONST_FILLS:
            copy_rules.fill(self, full, operands)
            return
        if name in EXACT_MOVES or name == "constant_pad_nd":  # padding with a constant: F.pad
            kind = copy_rules.move(self, name, full, operands, results)  # before a pooling kernel
            #                                                              moves data
        else:
            kind = copy_rules.compute(self, full, operands, results)
        new = [ptr(t) for t in results]
        into = [ptr(operands[0])] if name.endswith("_") and operands else []
        into += [ptr(t) for t in tensors((kwargs or {}).get("out"), wrapped=True)]
        srcs = {ptr(t) for t in operands}
        for p in filter(None, into):  # an in-place write keeps only what both sides were
            if p in self.by_kernel and kind != "computed":
                self.refuse(f"{full} into a buffer a kernel was handed (only kernels write there)")
            keep = ((p in self.fresh and p not in self.by_kernel)
                    or (p in self.meta and kind in ("meta", "fresh")))
            self._wrote(p, full, kind if keep else "written", hot, srcs)
        for p in filter(None, new):
            if p not in into:
                self._wrote(p, full, kind, hot, srcs)

    def _wrote(self, p: int, full: str, kind: str, hot: bool, srcs: set[int]) -> None:
        """Storage `p` now holds what op `full` made: constants, metadata, a copy, or values."""
        for s in (self.meta, self.moved, self.identity):
            s.discard(p)
        if kind in ("fresh", "kernel"):  # constants (a copy or cast of an allocation no kernel
            self.written.pop(p, None)     # touched), or a kernel's values moved as they are
            self.fresh.add(p)
            if kind == "kernel":
                self.by_kernel.add(p)
                if hot:
                    self.tainted.add(p)
            return
        self.written[p] = full
        self.fresh.discard(p)
        if kind == "structure" or (srcs and srcs <= self.structure):  # `mask.int()` too
            self.structure.add(p)
        if kind == "meta":
            self.meta.add(p)
        elif kind in ("moved", "identity"):
            self.moved.add(p)
            if kind == "identity":
                self.identity.add(p)
        if hot:
            self.tainted.add(p)
        elif p not in srcs:
            self.tainted.discard(p)

    def _forget(self, p: int) -> None:
        """A storage made anew: what the ledger knew of the old one at that address goes."""
        self.written.pop(p, None)
        self.tainted.discard(p)
        self.by_kernel.discard(p)
        for s in (self.meta, self.moved, self.identity, self.fresh):
            s.discard(p)

    def refuse(self, what: str) -> None:
        """Record a refused op (so a candidate that catches the exception is still disqualified)
        and, when the evaluation fails torch compute, raise inside the call."""
        self.torch_ops.add(what)
        self.denied = True
        if self.deny:
            raise DeniedOp(f"{what}: the candidate's host code may allocate, view and copy inputs "
                           "whole; everything else is the kernels' work (INTEGRITY.md, default deny)")

    def read(self, t: Any, how: str) -> None:
        """Values of `t` leave torch for the host (`tolist`, `numpy`) without a dispatched op."""
        if self.watching() and ptr(t) in self.tainted and not self._may_read(t):
            self.torch_ops.add(f"{how}() read input values on the host")

    def _may_read(self, t: Any) -> bool:
        """Host reads allowed on input-derived data: a scalar parameter, and up to 8 one-value
        results of kernels per call (a count that sizes the next allocation, as masked_select
        needs); a one-value clone made by torch is neither."""
        p = ptr(t)
        if p in self.scalars or p in self.structure:  # structure: its numbers come back marked
            return True
        if p in self.by_kernel and p not in self.written and one_value(t) and self.sizes_read < 8:
            self.sizes_read += 1
            return True
        return False

    def host_map(self, t: Any, others: tuple, how: str) -> None:
        """`Tensor.apply_/map_/map2_` run a Python callable per element, in place, dispatching
        nothing: host compute on whatever they touch, and a torch write of `t`."""
        if not self.watching():
            return
        ts = [t, *tensors(others, wrapped=True)]
        if any(ptr(x) in self.tainted for x in ts):
            self.torch_ops.add(f"{how}() computed on input values on the host")
            self.tainted.add(ptr(t))
        self.written[ptr(t)] = how
        self.fresh.discard(ptr(t))

    def launched(self, args: Any, kwargs: Any) -> None:
        """A kernel may write anything it was handed: input taint spreads to all its tensors."""
        ptrs = [p for p in map(ptr, tensors((args, kwargs), wrapped=True)) if p]
        sized = sorted({self.written[p] for p in ptrs if p in self.structure and p in self.written
                        and p not in self.moved})
        if sized:
            self.refuse(f"a kernel was handed what {', '.join(sized)} computed from structure "
                        "inputs (torch over them may size outputs and grids, not feed kernels)")
        handed = {p for p in ptrs if p in self.fresh}
        if trial(sys._getframe(1)):  # an autotuner's benchmark: the real launch follows it
            self.trials.update(handed - self.by_kernel)
        else:
            self.trials.difference_update(ptrs)
        self.by_kernel.update(handed)
        for p in ptrs:  # a kernel may write anything it was handed: no longer metadata, nor a copy
            self.meta.discard(p)
            self.moved.discard(p)
            self.identity.discard(p)
        if any(p in self.tainted for p in ptrs):
            self.tainted.update(ptrs)

    def finish(self, returned: list[Any], mutated: list[Any], inputs: list[Any]) -> None:
        """Only Triton kernels write the values of an output or of a declared-mutated input; an
        output that is an exact whole copy of an input computes nothing and may stand (the answer
        `floor` gives on integers), except on a data-movement task, where that copy is the task.
        Sets `launch_free`: every output is empty or such a copy, so no launch was owed."""
        own = {ptr(t) for t in inputs}
        free = True
        for kind, ts in (("output", returned), ("mutated input", mutated)):
            for t in ts:
                p = ptr(t)
                if not p:
                    continue  # an empty output holds no values
                if kind == "output" and p in self.identity and not self.movement:
                    continue
                free = False
                if p in self.written:
                    self.torch_ops.add(f"{self.written[p]} wrote the {kind} (only kernels may)")
                elif kind == "output" and p not in own and p not in self.fresh:
                    self.torch_ops.add("an output not allocated by torch.empty/zeros/full (only kernels may fill one)")
                elif kind == "output" and p in self.fresh and p not in self.by_kernel:
                    # a constant no kernel touched: after values were read back, its constant was
                    # computed on the host from kernel results (a host epilogue); otherwise an
                    # output the call never handed to a kernel holds torch's fill or nothing
                    self.torch_ops.add(
                        "an output filled on the host after reading kernel results back (only "
                        "kernels may write one)" if self.sizes_read else
                        "an output no kernel was handed (only kernels may write one)")
        self.launch_free = free


class DeniedOp(RuntimeError):
    """An aten op outside the allowlist, refused inside the candidate's call (default deny)."""


def movement_task(task: Any) -> bool:
    """A task whose answer is data movement, so torch moves of its data must not produce it: as
    the task declares (`DATA_MOVEMENT = (bool, why)`, an external suite's adapter decides by the
    reference's aten ops, `suites/movement.py`), else one whose every case costs no flops
    (permute_copy, diag_embed, index_*, kv_cache_append, triu). Also loads its STRUCTURE."""
    MONITOR.structure_at = structure_of(task)
    declared = getattr(task, "DATA_MOVEMENT", None)
    if declared is not None:
        return bool(declared[0] if isinstance(declared, tuple) else declared)
    try:
        return all(task.cost(c)["flops"] == 0 for c in task.CASES)
    except Exception:  # noqa: BLE001 - a suite without costs: not known to be one
        return False


def structure_of(task: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the task's STRUCTURE parameters in its reference's signature: inputs
    whose values shape an output or a grid (masked_select's mask, cu_seqlens), over which torch
    may compute sizes. Read when the worker loads the task (`movement_task`, its one hook)."""
    names = tuple(getattr(task, "STRUCTURE", ()) or ())
    for fn in (v for v in vars(task).values() if inspect.isfunction(v) and names):
        params = list(inspect.signature(fn).parameters)
        if all(n in params for n in names):
            return tuple((params.index(n), n) for n in names)
    return ()


MONITOR = Monitor()
