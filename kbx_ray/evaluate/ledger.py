"""The storage ledger: what the candidate's host code did during one checked call.

Fed by the dispatch monitor (every aten op, `dispatch_monitor.py`), the value readers (host reads
that dispatch nothing) and the launch counter (`triton_hooks.py`). Inputs are tainted, taint
follows ops and launches, any computing op on tainted data is torch compute, and only Triton
kernels may write the values of an output or of a declared-mutated input (INTEGRITY.md, classes
3 and 4). Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

import math
from typing import Any

from kbx_ray.evaluate.aten_ops import ALLOC, CONST_FILLS, META, MOVES, READS, VIEWS
from kbx_ray.evaluate.trees import tensors


def tensors_of(obj: Any) -> list[Any]:
    """The tensors in `obj`, Triton's tensor wrappers and descriptors included (`.base`)."""
    return tensors(obj, wrapped=True)


def _ptr(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return 0


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
        self.sizes_read = 0               # one-value kernel results read (output sizes)
        self.movement = False             # the task only moves data (its cost has no flops)

    def reset(self, inputs: tuple = ()) -> None:
        self.launches = 0
        self.torch_ops = set()
        self.written, self.fresh = {}, set()
        ts = tensors_of(inputs)
        self.tainted = {p for p in map(_ptr, ts) if p}
        self.passed = {_layout(t) for t in ts}
        self.scalars = {_ptr(t) for t in ts if _one_value(t)}  # scalar parameters as tensors
        self.by_kernel, self.sizes_read = set(), 0

    def watching(self) -> bool:
        return self.active and not self.paused

    def op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Account one aten op the candidate's code dispatched."""
        full = str(getattr(func, "__name__", func))
        name = full.split(".")[0]
        if name in VIEWS or name in META or full in CONST_FILLS:
            return
        operands = tensors_of((args, kwargs))
        results = tensors_of(out)
        if name in ALLOC:
            for p in map(_ptr, results):
                self.written.pop(p, None)
                self.tainted.discard(p)
                self.by_kernel.discard(p)
                self.fresh.add(p)
            return
        hot = any(p in self.tainted for p in map(_ptr, operands))
        if name in READS:
            if hot and not all(self._may_read(t) for t in operands):
                self.torch_ops.add(f"{name} read input values on the host")
            return
        if hot and (name not in MOVES or not self._pure_move(name, operands, results)):
            self.torch_ops.add(full)
        dests = [_ptr(t) for t in results]
        if name.endswith("_") and operands:
            dests.append(_ptr(operands[0]))
        dests += [_ptr(t) for t in tensors_of((kwargs or {}).get("out"))]
        for p in filter(None, dests):
            self.written[p] = full
            self.fresh.discard(p)
            if hot:
                self.tainted.add(p)
            elif p not in map(_ptr, operands):
                self.tainted.discard(p)

    def _pure_move(self, name: str, operands: list[Any], results: list[Any]) -> bool:
        """A move of input data that computes nothing: the dtype cast is exact (`x.float()` of
        fp16, never `x.to(torch.int32)`), and on a data-movement task the very tensor the call
        received is copied whole into a plain contiguous buffer (`x.contiguous()`), since there a
        permuted, diagonal, padded or indexed copy is the answer itself."""
        if name == "copy_" and len(operands) > 1:
            dst, src = operands[0], operands[1]
        elif operands and results:
            dst, src = results[0], operands[0]
        else:
            return True
        if not _lossless(src.dtype, dst.dtype):
            return False
        if not self.movement:
            return True
        return (name in ("copy_", "clone", "_to_copy", "contiguous") and _layout(src) in self.passed
                and dst.shape == src.shape and dst.is_contiguous() and dst.storage_offset() == 0)

    def read(self, t: Any, how: str) -> None:
        """Values of `t` leave torch for the host (`tolist`, `numpy`) without a dispatched op."""
        if self.watching() and _ptr(t) in self.tainted and not self._may_read(t):
            self.torch_ops.add(f"{how}() read input values on the host")

    def _may_read(self, t: Any) -> bool:
        """Host reads allowed on input-derived data: a scalar parameter, and up to 8 one-value
        results of kernels per call (a count that sizes the next allocation, as masked_select
        needs); a one-value clone made by torch is neither."""
        p = _ptr(t)
        if p in self.scalars:
            return True
        if p in self.by_kernel and p not in self.written and _one_value(t) and self.sizes_read < 8:
            self.sizes_read += 1
            return True
        return False

    def host_map(self, t: Any, others: tuple, how: str) -> None:
        """`Tensor.apply_/map_/map2_` run a Python callable per element, in place, dispatching
        nothing: host compute on whatever they touch, and a torch write of `t`."""
        if not self.watching():
            return
        ts = [t, *tensors_of(others)]
        if any(_ptr(x) in self.tainted for x in ts):
            self.torch_ops.add(f"{how}() computed on input values on the host")
            self.tainted.add(_ptr(t))
        self.written[_ptr(t)] = how
        self.fresh.discard(_ptr(t))

    def launched(self, args: Any, kwargs: Any) -> None:
        """A kernel may write anything it was handed: input taint spreads to all its tensors."""
        ptrs = [p for p in map(_ptr, tensors_of((args, kwargs))) if p]
        self.by_kernel.update(p for p in ptrs if p in self.fresh)
        if any(p in self.tainted for p in ptrs):
            self.tainted.update(ptrs)

    def finish(self, returned: list[Any], mutated: list[Any], inputs: list[Any]) -> None:
        """Only Triton kernels write the values of an output or of a declared-mutated input."""
        own = {_ptr(t) for t in inputs}
        for kind, ts in (("output", returned), ("mutated input", mutated)):
            for t in ts:
                p = _ptr(t)
                if not p:
                    continue
                if p in self.written:
                    self.torch_ops.add(f"{self.written[p]} wrote the {kind} (only kernels may)")
                elif kind == "output" and p not in own and p not in self.fresh:
                    self.torch_ops.add("an output not allocated by torch.empty/zeros/full (only kernels may fill one)")
                elif kind == "output" and p in self.fresh and p not in self.by_kernel \
                        and self.sizes_read:
                    # a constant fill no kernel touched, after values were read back: its constant
                    # was computed on the host from kernel results (a host epilogue)
                    self.torch_ops.add("an output filled on the host after reading kernel results "
                                       "back (only kernels may write one)")


def _layout(t: Any) -> tuple:
    return (_ptr(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _lossless(a: Any, b: Any) -> bool:
    """Every value of dtype `a` is exactly representable in dtype `b`."""
    import torch

    if a == b or a == torch.bool:
        return True
    if a.is_complex or b.is_complex or b == torch.bool:
        return False
    fa, fb = a.is_floating_point, b.is_floating_point
    if fa and fb:
        ia, ib = torch.finfo(a), torch.finfo(b)
        return ib.eps <= ia.eps and ib.max >= ia.max and ib.tiny <= ia.tiny
    if fa:
        return False
    ia = torch.iinfo(a)
    if fb:
        return ia.bits <= -math.log2(torch.finfo(b).eps) + 1
    ib = torch.iinfo(b)
    return ib.min <= ia.min and ib.max >= ia.max


def movement_task(task: Any) -> bool:
    """A task whose every case costs no flops (permute_copy, diag_embed, index_*, kv_cache_append,
    triu): its answer is data movement, so torch moves of its data must not produce it."""
    try:
        return all(task.cost(c)["flops"] == 0 for c in task.CASES)
    except Exception:  # noqa: BLE001 - a suite without costs: not known to be one
        return False


def _one_value(t: Any) -> bool:
    """A one-element storage: reading an input that is one (a scalar parameter passed as a tensor)
    is not reading a result. Only inputs qualify: a one-element clone of input data does not."""
    try:
        return t.untyped_storage().nbytes() <= t.element_size()
    except Exception:  # noqa: BLE001
        return False


MONITOR = Monitor()
