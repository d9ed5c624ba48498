"""Nested values (tuples, lists, dicts of tensors and scalars) -> the tensors they hold: one walk.
More: kbx_ray/evaluate/common/README.md, `trees.py`.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils import _pytree

_iter = _pytree.tree_iter
_map_only = _pytree.tree_map_only
_Tensor = torch.Tensor


def tensors(obj: Any, wrapped: bool = False) -> list[torch.Tensor]:
    """The tensors in `obj`, depth first. With `wrapped`, a leaf that carries a tensor as `.base`
    (Triton's TensorWrapper and TensorDescriptor, as a kernel receives them) counts as that one."""
    if isinstance(obj, _Tensor):  # the common case, without the walk
        return [obj]
    out: list[torch.Tensor] = []
    for x in _iter(obj):
        if isinstance(x, _Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):  # a subclass pytree does not know: its items
            out += tensors(list(x), wrapped)
        elif isinstance(x, dict):
            out += tensors(list(x.values()), wrapped)
        elif wrapped:
            base = getattr(x, "base", None)
            if isinstance(base, _Tensor):
                out.append(base)
    return out


def map_tensors(fn: Callable[[torch.Tensor], Any], obj: Any) -> Any:
    """`obj` rebuilt with `fn` applied to each tensor; other leaves are kept as they are."""
    return _map_only(_Tensor, fn, obj)
