"""What the candidate's host code computes with torch, as it happens: the dispatch monitor.
More: kbx_ray/evaluate/worker/README.md, `dispatch_monitor.py`.
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
