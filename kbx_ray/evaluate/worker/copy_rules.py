"""The default deny's rules for the ops that may write values: a constant fill, a copy (its source
decides: a kernel's result, an input, values torch wrote) and any other op (computing, refused but
integer index arithmetic on metadata and sizes over STRUCTURE inputs). Each returns what the
destination now holds for the storage ledger (`ledger.Monitor.op`), or has the ledger refuse the
op (`Monitor.refuse`). Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

import math
from typing import Any

from kbx_ray.evaluate.worker.aten_ops import EXACT_MOVES, lossless
from kbx_ray.evaluate.worker.storages import integral, layout, ptr, whole

# `m` is the storage ledger (`ledger.Monitor`; not imported: the ledger imports this module)
Monitor = Any


def fill(m: Monitor, full: str, operands: list[Any]) -> None:
    """A constant fill is an allocation's init only on a whole buffer the call allocated and
    no kernel was handed yet (`out.zero_()` before an atomic-add kernel), whoever calls it: the
    candidate, or a Config `pre_hook` (`nargs["acc_ptr"].zero_()`) between the autotuner's
    trial launches, whose results it throws away; metadata tensors may be filled too. Any
    other fill writes values: refused."""
    if not operands or operands[0].numel() == 0:
        return
    t = operands[0]
    p = ptr(t)
    if p in m.meta:
        return
    if p in m.fresh and (p not in m.by_kernel or p in m.trials) and whole(t):
        return  # before the first real launch that writes it (a Config pre_hook between trials)
    why = ("a buffer a kernel was handed" if p in m.by_kernel else
           "part of a buffer" if p in m.fresh else "a buffer torch did not just allocate")
    m.refuse(f"{full} into {why}")


def move(m: Monitor, name: str, full: str, operands: list[Any], results: list[Any]) -> str:
    """What a copy computes: its source decides. Returns the kind of its destination
    ("meta", "fresh", "kernel", "moved", "identity"). A kernel's result may be copied, re-laid
    out and cast between float types (`out.transpose(1, 2).contiguous()`, `acc.to(x.dtype)`):
    its values stay the kernel's. Refused: a truncating or wrapping cast of a kernel's result,
    a copy of values torch wrote, a lossy cast of input data, and on a data-movement task any
    copy but the very input whole into a plain contiguous buffer."""
    if name == "copy_" and len(operands) > 1:
        dst, src = operands[0], operands[1]
    elif operands and results:
        dst, src = results[0], operands[0]
    else:
        return "moved"
    p = ptr(src)
    if p == 0:
        return "moved"  # nothing moved (an empty tensor)
    if p in m.meta:
        return "meta"
    if p in m.fresh and p not in m.by_kernel:
        return "fresh"
    if p in m.by_kernel:  # a kernel's result, re-laid out or re-typed (`.to(x.dtype)`)
        if m.movement:
            m.refuse(f"{full} of a buffer a kernel was handed (on a data-movement task "
                     "torch's copy is the answer itself)")
        elif not (lossless(src.dtype, dst.dtype)
                  or (src.dtype.is_floating_point and dst.dtype.is_floating_point)):
            m.refuse(f"{full} (a cast {src.dtype} -> {dst.dtype} of a kernel's result "
                     "truncates or wraps: it computes)")
        return "kernel"
    if p in m.written and p not in m.moved:
        m.refuse(f"{full} of values torch wrote")
        return "moved"
    if not lossless(src.dtype, dst.dtype):
        m.refuse(f"{full} (a lossy cast {src.dtype} -> {dst.dtype} computes)")
        return "moved"
    plain = (name in EXACT_MOVES and src.dtype == dst.dtype and dst.shape == src.shape
             and (name != "copy_" or (ptr(dst) in m.fresh and whole(dst))))
    exact = plain and layout(src) in m.passed
    if m.movement and not (exact and dst.is_contiguous() and dst.storage_offset() == 0) \
            and p not in m.structure:  # `mask.int()` sizes; it is not the answer
        m.refuse(f"{full} (on a data-movement task only a whole copy of an input into a "
                 "plain contiguous buffer is not the answer itself)")
    # elsewhere any whole view of an input copies it whole (`x.flatten().clone()`): the
    # parent compares the values, and a launch-free call must equal an input (rotation)
    return "identity" if exact or (plain and whole_input(m, src)) else "moved"


def whole_input(m: Monitor, t: Any) -> bool:
    """`t` views every element of an input as the call received it, each once (any order)."""
    p, n = ptr(t), t.numel()
    return whole(t) and any(q == p and d == t.dtype and math.prod(shape) == n
                             for q, _, shape, _, d in m.passed)


def compute(m: Monitor, full: str, operands: list[Any], results: list[Any]) -> str:
    """Computing ops are refused, whoever made their operands, except integer index
    arithmetic on metadata tensors only (`strides[order] * 1`), whose results are metadata."""
    if operands and all(ptr(t) in m.meta and integral(t) for t in operands) \
            and all(integral(t) for t in results):
        return "meta"
    if operands and all(ptr(t) in m.structure for t in operands):
        return "structure"  # `repeats.sum()`: sizes and grids only (see `launched`, `finish`)
    m.refuse(full)
    return "computed"
