"""The input cache's size and the roofline's dtype walk the argument tree through trees.py (one
walk): the same tensors, in the same order, as their own walks took before, on every shape of
tree a task hands over (tuples, lists, dicts, named tuples, subclasses pytree does not know)."""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import torch

from kbx_ray.evaluate.common.inputs import _nbytes
from kbx_ray.evaluate.parent.roofline import compute_dtype

Pair = namedtuple("Pair", "a b")


class _List(list):
    pass


class _Dict(dict):
    pass


def _nbytes_before(obj: Any) -> int:  # inputs._nbytes as it was written by hand
    if isinstance(obj, torch.Tensor):
        return obj.untyped_storage().nbytes()
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes_before(x) for x in obj)
    if isinstance(obj, dict):
        return sum(_nbytes_before(x) for x in obj.values())
    return 0


def _trees() -> list[Any]:
    f32, f16 = torch.zeros(3), torch.zeros(5, dtype=torch.float16)
    i8, i64 = torch.zeros(7, dtype=torch.int8), torch.zeros(2, dtype=torch.int64)
    base = torch.zeros(16)
    return [
        ((f32,), {}),
        ((i64, f16, f32), {"n": 4}),
        ((3, None, "s"), {"x": i8, "y": f32}),
        ((Pair(i64, i8), _List([f16, base[2:5]])), _Dict(z=base, w=[base.view(4, 4)])),
        (([], {}), {"deep": [[[(i64, {"k": f16})]]]}),
        ((), {}),
    ]


def test_input_bytes_are_those_of_the_hand_walk() -> None:
    for tree in _trees():
        assert _nbytes(tree) == _nbytes_before(tree), tree


def test_compute_dtype_takes_the_first_tensor_depth_first() -> None:
    got = [compute_dtype(t) for t in _trees()]
    assert got == ["tf32", "float16", "int8", "int8", "float16", "float32"]
