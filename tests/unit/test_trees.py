"""The one tensor walk (kbx_ray/evaluate/common/trees.py): the order and leaves every hand-written walker
gave, and a candidate that tampers with it (or with torch's pytree under it) is seen."""
from __future__ import annotations

import collections
from typing import Any

import torch
from torch.utils import _pytree

from kbx_ray.evaluate.common import trees
from kbx_ray.evaluate.worker.sentinels import Sentinels

Pair = collections.namedtuple("Pair", "a b")


class Row(tuple):
    """A tuple subclass pytree does not register."""


class Table(dict):
    """A dict subclass pytree does not register."""


class Wrapper:
    """Holds a tensor as `.base`, as Triton's TensorWrapper does."""

    def __init__(self, base: torch.Tensor) -> None:
        self.base = base


def _ids(ts: list[torch.Tensor]) -> list[int]:
    return [id(t) for t in ts]


def test_same_tensors_in_the_same_order_as_the_hand_written_walks() -> None:
    """Depth first, dicts in insertion order, any list/tuple/dict subclass walked by its items,
    scalars, strings, None and sizes dropped (what rotation.py, shim.py and the guards gave)."""
    x, y, z = torch.zeros(2), torch.ones(3), torch.arange(4)
    m = torch.max(torch.zeros(3, 3), 0)
    cases = [
        (x, [x]), ((x,), [x]), ([x, y], [x, y]),
        (((x, 1.0, [y, "s"]), {"b": z, "a": x}), [x, y, z, x]), ({"z": y, "a": x}, [y, x]),
        (collections.OrderedDict(z=x, a=y), [x, y]), (Pair(x, [y, z]), [x, y, z]),
        (Row((x, y)), [x, y]), (Table(b=(z,), a=x), [z, x]), (m, [m.values, m.indices]),
        (torch.Size([2, 3]), []), (None, []), (3, []), ("text", []), ((None, (), {}), []),
        (collections.deque([x]), [x]),  # the one difference: the old walks skipped deques
    ]
    for obj, expected in cases:
        assert _ids(trees.tensors(obj)) == _ids(expected), obj


def test_wrapped_counts_the_tensor_behind_a_base() -> None:
    x, y = torch.zeros(2), torch.ones(2)
    obj = ((Wrapper(x), 4), {"k": y})
    assert _ids(trees.tensors(obj)) == [id(y)]
    assert _ids(trees.tensors(obj, wrapped=True)) == [id(x), id(y)]


def test_map_tensors_keeps_other_leaves_and_the_containers() -> None:
    x = torch.zeros(2)
    out = trees.map_tensors(lambda t: t + 1, [x, 2.5, ("cpu", x), {"k": x}])
    assert isinstance(out, list) and out[1] == 2.5 and out[2][0] == "cpu"
    assert torch.equal(out[0], torch.ones(2)) and torch.equal(out[3]["k"], torch.ones(2))
    assert torch.equal(x, torch.zeros(2))


def test_sentinels_see_the_walk_or_pytree_tampered_with() -> None:
    sentinels = Sentinels()
    assert sentinels.changed() == []
    original = trees._iter
    trees._iter = lambda obj: iter(())  # a walk that hides every tensor from the ledger
    try:
        assert any(name.endswith("._iter") for name in sentinels.changed())
    finally:
        trees._iter = original
    nodes = _pytree.SUPPORTED_NODES
    nodes[Wrapper] = nodes[list]  # a node type registered to hide what it holds
    try:
        assert "pytree.SUPPORTED_NODES.<names>" in sentinels.changed()
    finally:
        del nodes[Wrapper]
    flatten = _pytree.tree_iter
    _pytree.tree_iter = lambda tree, is_leaf=None: iter(())
    try:
        assert "pytree.tree_iter" in sentinels.changed()
    finally:
        _pytree.tree_iter = flatten
    assert sentinels.changed() == []
