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


def _internal(frame: Any) -> bool:
    """True when the innermost frame outside torch's own Python is Triton's or the harness's data
    movement: such ops are not the candidate's."""
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR + "/torch/"):
        frame = frame.f_back
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
    """`Tensor.tolist/numpy/__array__` read values, and `apply_/map_/map2_` compute on them,
    without dispatching an op: report them."""
    import torch

    for name in ("tolist", "numpy", "__array__"):
        original = getattr(torch.Tensor, name)

        def reader(self: Any, *a: Any, __orig: Any = original, __name: str = name,
                   **k: Any) -> Any:
            MONITOR.read(self, __name.strip("_"))
            return __orig(self, *a, **k)

        setattr(torch.Tensor, name, reader)
    for name in ("apply_", "map_", "map2_"):
        original = getattr(torch.Tensor, name)

        def mapper(self: Any, *a: Any, __orig: Any = original, __name: str = name,
                   **k: Any) -> Any:
            MONITOR.host_map(self, a, __name)
            return __orig(self, *a, **k)

        setattr(torch.Tensor, name, mapper)

