"""Aten op names -> what each op does to values: the packets the storage ledger sorts ops by.
More: kbx_ray/evaluate/worker/README.md, `aten_ops.py`.
"""
from __future__ import annotations

import math
from typing import Any


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


ALLOC = _names("""
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like
    new_empty new_empty_strided new_zeros new_ones new_full scalar_tensor empty_permuted
""")
CONST_FILLS = _names("fill_.Scalar zero_.default fill_.int fill_.float")
VIEWS = _names("""
    view _unsafe_view _reshape_alias as_strided t transpose permute expand squeeze unsqueeze
    select slice split split_with_sizes chunk unbind narrow detach alias diagonal movedim
    unflatten view_as_real view_as_complex real imag expand_as view_as unfold
    t_ transpose_ squeeze_ unsqueeze_ as_strided_ swapdims_ swapaxes_ detach_ swapdims swapaxes
""")
META = _names("""
    sym_size sym_stride sym_numel sym_storage_offset is_contiguous is_same_size size stride
    numel dim _has_compatible_shallow_copy_type result_type is_non_overlapping_and_dense
    is_strides_like_format _nested_tensor_size
""")
MOVES = _names("""
    copy_ clone _to_copy contiguous _copy_from _copy_from_and_resize lift_fresh
    lift_fresh_copy lift constant_pad_nd _to_dense
""")
LIFTS = _names("lift_fresh lift_fresh_copy lift")
EXACT_MOVES = _names("copy_ clone _to_copy contiguous")  # whole copies an identity answer may be
READS = _names("_local_scalar_dense item is_nonzero equal")


def lossless(a: Any, b: Any) -> bool:
    """Every value of dtype `a` is exactly representable in dtype `b`: a cast `a` -> `b` (`_to_copy`,
    `copy_` between dtypes) moves values; any other cast computes (truncates, rounds or wraps)."""
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
