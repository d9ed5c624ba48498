"""What the candidate's host code computes with torch, as it happens: the dispatch monitor.

A candidate can hide a torch call from the AST (a method call on a tensor looks like any other
call), but not from the dispatcher: a `TorchDispatchMode` hands every aten op to the storage
ledger (`ledger.MONITOR`); the value readers (`value_readers.py`) report the reads and per-element
host maps that dispatch nothing (`tolist`, `numpy`, `apply_`). The monitor stays on inside a
Triton launch; only Triton's own data movement and the harness's frames are exempt
(`frames.INTERNAL`). The same ops feed the program recorder (`recorder.py`). Standard library and
torch only (the worker imports it).
"""
from __future__ import annotations

import sys
from typing import Any

from kbx_ray.evaluate.worker.frames import internal
from kbx_ray.evaluate.worker.ledger import MONITOR
from kbx_ray.evaluate.worker.recorder import RECORDER


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that accounts every aten op the candidate's code runs (`Monitor.op`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            watching, recording = MONITOR.watching(), RECORDER.on()
            if watching or recording:
                inside = internal(sys._getframe(1))
                if watching and not inside:
                    MONITOR.op(func, args, kwargs, out)
                if recording:  # the program the replay judges (recorder.py)
                    RECORDER.op(func, args, kwargs, out, inside)
            return out

    mode = _Watch()
    import torch

    with mode:  # the first entry imports torch._dynamo, which rewraps torch.manual_seed: do it now,
        torch.zeros(1).add_(1)  # before the sentinels are taken, outside any candidate's call
    return mode
