"""What the candidate's host code computes with torch, as it happens: the dispatch monitor.

A candidate can hide a torch call from the AST (a method call on a tensor looks like any other
call), but not from the dispatcher: a `TorchDispatchMode` hands every aten op to the storage
ledger (`ledger.MONITOR`); the value readers (`value_readers.py`) report the reads and per-element
host maps that dispatch nothing (`tolist`, `numpy`, `apply_`). The monitor stays on inside a
Triton launch; only Triton's own data movement and the harness's frames are exempt
(`frames.INTERNAL`). Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

import sys
from typing import Any

from kbx_ray.evaluate.worker.frames import internal
from kbx_ray.evaluate.worker.ledger import MONITOR


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that accounts every aten op the candidate's code runs (`Monitor.op`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if MONITOR.watching() and not internal(sys._getframe(1)):
                MONITOR.op(func, args, kwargs, out)
            return out

    mode = _Watch()
    import torch

    with mode:  # the first entry imports torch._dynamo, which rewraps torch.manual_seed: do it now,
        torch.zeros(1).add_(1)  # before the sentinels are taken, outside any candidate's call
    return mode
