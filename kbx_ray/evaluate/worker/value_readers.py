"""Values that leave torch for the host without a dispatched op -> reported and marked: the value
readers (`tolist`, `numpy`, `item`, `float(t)`, `apply_`, `torch.Tensor([...])`).

The dispatch monitor (`dispatch_monitor.py`) sees every aten op; these reads dispatch nothing, so
`install` wraps them on `torch.Tensor`. What they return from input-derived data is marked
(`host_values.py`); the storage ledger (`ledger.MONITOR`) counts them. Standard library and torch
only (the worker imports it).
"""
from __future__ import annotations

import sys
from typing import Any

import torch

from kbx_ray.evaluate.worker import host_values as hv
from kbx_ray.evaluate.worker import marked_numbers as mn
from kbx_ray.evaluate.worker.frames import READER_FILES, internal
from kbx_ray.evaluate.worker.ledger import MONITOR


def install() -> None:
    """Values leave torch for the host without a dispatched op: report and mark them.

    `tolist/numpy/__array__` are reported to the ledger (a read of input data), `apply_/map_/
    map2_` (a Python callable per element) are host compute. What `item`/`tolist` return from
    input-derived data is marked (`host_values`: `read`, `input` for a scalar parameter); `numpy`/
    `__array__` of kernel results, whose values no mark follows, are refused; `float(t)`/`int(t)`
    may not return a marked number (CPython drops the subclass), so their value is kept
    (`marked_numbers.note`). TensorBase cannot be patched, but inside the call the TorchFunctionMode
    (`host_values.make_mode`) routes every method call, base-class ones included
    (`super(torch.Tensor, x).tolist()`), through `torch.Tensor.<name>`, i.e. through these
    wrappers; a wrapper that sees the mode enabled lets the mode's own call do the accounting, so
    each read is counted once. Also wraps `math` (`host_values.install_math`) and the legacy
    constructor `torch.Tensor([...])`, which the mode does not see."""
    mode_on = torch._C._is_torch_function_mode_enabled
    for name in ("tolist", "numpy", "__array__"):
        _wrap(name, _reported(name), mode_on)
    _wrap("item", _marked, mode_on)
    for name in ("__float__", "__int__", "__index__", "__complex__"):
        _wrap(name, _converted, mode_on)
    _install_mappers()
    _install_constructor()
    hv.install_math()


def _kind(t: Any) -> Any:
    """The mark a value read from `t` carries (`mn.INPUT`, `mn.READ`), or None. Called by a
    reader's `after` (`_reported`, `_marked`, `_converted`), itself called by the reader."""
    if not MONITOR.watching():
        return None
    p = _storage(t)
    k = mn.INPUT if p in MONITOR.scalars else mn.READ if p in MONITOR.tainted else None
    if k is None:
        return None
    frame = sys._getframe(2)  # past the readers and the mode: whose read is it?
    while frame is not None and frame.f_code.co_filename.endswith(READER_FILES):
        frame = frame.f_back
    return None if internal(frame) else k


def _wrap(name: str, after: Any, mode_on: Any) -> None:
    original = getattr(torch.Tensor, name)

    def reader(self: Any, *a: Any, **k: Any) -> Any:
        if mode_on():
            return original(self, *a, **k)
        return after(self, original(self, *a, **k))
    reader.__name__ = reader.__qualname__ = name
    setattr(torch.Tensor, name, reader)


def _reported(name: str) -> Any:
    how = name.strip("_")

    def after(self: Any, r: Any) -> Any:
        MONITOR.read(self, how)
        k = _kind(self)
        if k == mn.READ and how != "tolist":
            hv.refuse(f"{how}() of kernel results or input values (their numbers carry no "
                      "mark; read a count with item())")
        return _verbatim(mn.mark(r, k), k) if k else r
    return after


def _verbatim(r: Any, k: Any) -> Any:
    if k == mn.INPUT:  # a scalar parameter's own values: the call's arguments, as passed
        hv.add_args(r)
    return r


def _marked(self: Any, r: Any) -> Any:
    k = _kind(self)
    return _verbatim(mn.mark(r, k), k) if k else r


def _converted(self: Any, r: Any) -> Any:
    k = _kind(self)
    if k == mn.READ and (not isinstance(r, int) or self.is_floating_point()):
        hv.refuse("float()/complex() of kernel results or input values (a float is never a "
                  "size, and CPython drops a mark from what __float__ returns)")
    if k and isinstance(r, (int, float)) and (isinstance(r, float) or self.is_floating_point()):
        mn.note(float(r), k)
        _verbatim(mn.mark(float(r), k), k)
    return r


def _install_mappers() -> None:
    """`apply_/map_/map2_` run a Python callable per element: host compute, told to the ledger."""
    for name in ("apply_", "map_", "map2_"):
        setattr(torch.Tensor, name, _mapper(getattr(torch.Tensor, name), name))


def _mapper(original: Any, name: str) -> Any:
    """The original in a closure, not a parameter: no keyword the candidate passes replaces it."""

    def mapper(self: Any, *a: Any, **k: Any) -> Any:
        MONITOR.host_map(self, a, name)
        return original(self, *a, **k)

    return mapper


def _install_constructor() -> None:
    """The legacy constructor `torch.Tensor([...])`, which no mode sees, refuses marked numbers."""
    import torch._dynamo  # noqa: F401 - its polyfills check Tensor.__new__'s signature at import

    base_new = torch.Tensor.__new__

    def __new__(cls: Any, *a: Any, **k: Any) -> Any:
        if MONITOR.watching() and hv.find((a, k)):
            hv.refuse("torch.Tensor() was handed a number read back to the host or a float "
                      "argument of the call")
        return base_new(cls, *a, **k)

    torch.Tensor.__new__ = staticmethod(__new__)  # type: ignore[assignment]


def _storage(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return 0
