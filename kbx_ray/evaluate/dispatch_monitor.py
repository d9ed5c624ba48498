"""What the candidate's host code computes with torch, as it happens: the dispatch monitor.

A candidate can hide a torch call from the AST (a method call on a tensor looks like any other
call), but not from the dispatcher: a `TorchDispatchMode` hands every aten op to the storage
ledger (`ledger.MONITOR`), and the value readers report the reads and per-element host maps that
dispatch nothing (`tolist`, `numpy`, `apply_`). The monitor stays on inside a Triton launch; only
Triton's own data movement and the harness's frames are exempt (`INTERNAL`). Standard library and
torch only (the worker imports it).
"""
from __future__ import annotations

import os
import sys
from typing import Any

from kbx_ray.evaluate.ledger import MONITOR

_TORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__import__("torch").__file__)))
# Triton's own data movement, by code object (file suffix, function): the interpreter's copies to
# and from the host, autotune's reset_to_zero/restore_value and its benchmark buffers. Candidate
# callables that Triton calls (grids, hooks, heuristics, prune/perf models) run in frames of their
# own and stay monitored; so does the kernel body under the interpreter.
INTERNAL = frozenset({
    ("triton/runtime/interpreter.py", "_to_cpu"), ("triton/runtime/interpreter.py", "_from_cpu"),
    ("triton/runtime/interpreter.py", "_init_args_hst"),
    ("triton/runtime/interpreter.py", "_restore_args_dev"),
    ("triton/runtime/autotuner.py", "_pre_hook"), ("triton/runtime/autotuner.py", "_post_hook"),
    ("triton/testing.py", "do_bench"),
})
# The frames of the runtime guards (once one file, guards.py) and of the interpreter's
# compatibility layer: the ops they dispatch are the harness's.
_HARNESS_FILES = tuple(f"kbx_ray/evaluate/{m}.py" for m in (
    "guards", "aten_ops", "ledger", "dispatch_monitor", "triton_hooks", "sentinels",
    "interp_compat"))


_READER_FILES = ("kbx_ray/evaluate/dispatch_monitor.py", "kbx_ray/evaluate/host_values.py")


def _internal(frame: Any) -> bool:
    """True when the innermost frame outside torch's own Python is Triton's or the harness's data
    movement: such ops are not the candidate's."""
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR + "/torch/")
                                 or frame.f_code.co_filename.endswith(_READER_FILES[1])):
        frame = frame.f_back  # torch's own Python, and the host-values mode that called it
    if frame is None:
        return False
    code = frame.f_code
    path = code.co_filename.replace(os.sep, "/")
    if path.endswith(_HARNESS_FILES):
        return True
    return any(path.endswith(f) and code.co_name == n for f, n in INTERNAL)


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that accounts every aten op the candidate's code runs (`Monitor.op`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if MONITOR.watching() and not _internal(sys._getframe(1)):
                MONITOR.op(func, args, kwargs, out)
            return out

    mode = _Watch()
    import torch

    with mode:  # the first entry imports torch._dynamo, which rewraps torch.manual_seed: do it now,
        torch.zeros(1).add_(1)  # before the sentinels are taken, outside any candidate's call
    return mode


def install_value_readers() -> None:
    """Values leave torch for the host without a dispatched op: report and mark them.

    `tolist/numpy/__array__` are reported to the ledger (a read of input data), `apply_/map_/
    map2_` (a Python callable per element) are host compute. What `item`/`tolist` return from
    input-derived data is marked (`host_values`: `read`, `input` for a scalar parameter); `numpy`/
    `__array__` of kernel results, whose values no mark follows, are refused; `float(t)`/`int(t)`
    may not return a marked number (CPython drops the subclass), so their value is kept
    (`host_values.note`). TensorBase cannot be patched, but inside the call the TorchFunctionMode
    (`host_values.make_mode`) routes every method call, base-class ones included
    (`super(torch.Tensor, x).tolist()`), through `torch.Tensor.<name>`, i.e. through these
    wrappers; a wrapper that sees the mode enabled lets the mode's own call do the accounting, so
    each read is counted once. Also wraps `math` (`host_values.install_math`) and the legacy
    constructor `torch.Tensor([...])`, which the mode does not see."""
    import torch

    from kbx_ray.evaluate import host_values as hv

    mode_on = torch._C._is_torch_function_mode_enabled

    def kind(t: Any) -> Any:
        if not MONITOR.watching():
            return None
        p = _storage(t)
        k = hv.INPUT if p in MONITOR.scalars else hv.READ if p in MONITOR.tainted else None
        if k is None:
            return None
        frame = sys._getframe(2)  # past the readers and the mode: whose read is it?
        while frame is not None and frame.f_code.co_filename.endswith(_READER_FILES):
            frame = frame.f_back
        return None if _internal(frame) else k

    def wrap(name: str, after: Any) -> None:
        original = getattr(torch.Tensor, name)

        def reader(self: Any, *a: Any, **k: Any) -> Any:
            if mode_on():
                return original(self, *a, **k)
            return after(self, original(self, *a, **k))
        reader.__name__ = reader.__qualname__ = name
        setattr(torch.Tensor, name, reader)

    def reported(name: str) -> Any:
        how = name.strip("_")

        def after(self: Any, r: Any) -> Any:
            MONITOR.read(self, how)
            k = kind(self)
            if k == hv.READ and how != "tolist":
                hv.refuse(f"{how}() of kernel results or input values (their numbers carry no "
                          "mark; read a count with item())")
            return verbatim(hv.mark(r, k), k) if k else r
        return after

    def verbatim(r: Any, k: Any) -> Any:
        if k == hv.INPUT:  # a scalar parameter's own values: the call's arguments, as passed
            hv.add_args(r)
        return r

    def marked(self: Any, r: Any) -> Any:
        k = kind(self)
        return verbatim(hv.mark(r, k), k) if k else r

    def converted(self: Any, r: Any) -> Any:
        k = kind(self)
        if k == hv.READ and (not isinstance(r, int) or self.is_floating_point()):
            hv.refuse("float()/complex() of kernel results or input values (a float is never a "
                      "size, and CPython drops a mark from what __float__ returns)")
        if k and isinstance(r, (int, float)) and (isinstance(r, float) or self.is_floating_point()):
            hv.note(float(r), k)
            verbatim(hv.mark(float(r), k), k)
        return r

    for name in ("tolist", "numpy", "__array__"):
        wrap(name, reported(name))
    wrap("item", marked)
    for name in ("__float__", "__int__", "__index__", "__complex__"):
        wrap(name, converted)
    for name in ("apply_", "map_", "map2_"):
        original = getattr(torch.Tensor, name)

        def mapper(self: Any, *a: Any, __orig: Any = original, __name: str = name,
                   **k: Any) -> Any:
            MONITOR.host_map(self, a, __name)
            return __orig(self, *a, **k)

        setattr(torch.Tensor, name, mapper)
    import torch._dynamo  # noqa: F401 - its polyfills check Tensor.__new__'s signature at import

    base_new = torch.Tensor.__new__

    def __new__(cls: Any, *a: Any, **k: Any) -> Any:
        if MONITOR.watching() and hv.find((a, k)):
            hv.refuse("torch.Tensor() was handed a number read back to the host or a float "
                      "argument of the call")
        return base_new(cls, *a, **k)

    torch.Tensor.__new__ = staticmethod(__new__)  # type: ignore[assignment]
    hv.install_math()


def _storage(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return 0
