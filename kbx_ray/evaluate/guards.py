"""Runtime guards inside the sandbox worker: Triton launch counting and aten compute detection.

They complement the static checks: a candidate can hide a torch call from the AST (a method call on
a tensor looks like any other call), but not from the dispatcher. Triton launches are counted by
wrapping the launcher classes, and the dispatch monitor is paused while a Triton kernel runs, because
the CPU interpreter itself moves data with aten ops. Standard library and torch only.
"""
from __future__ import annotations

from typing import Any

# Aten ops that allocate, view, copy or query: the candidate contract lets torch do these.
_ALLOWED_PREFIXES = (
    "empty", "zeros", "ones", "full", "new_", "fill", "zero_", "view", "_unsafe_view", "reshape",
    "_reshape", "as_strided", "t.", "t_", "transpose", "permute", "expand", "squeeze", "unsqueeze",
    "select", "slice", "split", "chunk", "unbind", "narrow", "detach", "alias", "clone", "contiguous",
    "copy", "_copy", "_to_copy", "to.", "lift", "flatten", "unflatten", "resize", "set_", "arange",
    "diagonal", "movedim", "_local_scalar_dense", "is_", "sym_", "stride", "size", "scalar_tensor",
    "_has_compatible_shallow_copy_type", "numel", "dim", "item", "result_type", "_to_dense",
)


def _is_allowed(name: str) -> bool:
    short = name.split("::", 1)[-1] if "::" in name else name.replace("aten.", "", 1)
    return short.startswith(_ALLOWED_PREFIXES)


class Monitor:
    """Counts Triton launches and records aten compute ops while `active`."""

    def __init__(self) -> None:
        self.active = False
        self.paused = 0
        self.launches = 0
        self.torch_ops: set[str] = set()

    def reset(self) -> None:
        self.launches = 0
        self.torch_ops = set()


MONITOR = Monitor()


def install_launch_counter() -> None:
    """Wrap the JIT launchers (compiled and interpreted) so every launch is counted."""
    import triton.runtime.jit as jit

    classes: list[Any] = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - older triton
        pass
    for cls in classes:
        original = cls.run

        def run(self: Any, *args: Any, __orig: Any = original, **kwargs: Any) -> Any:
            MONITOR.launches += 1
            MONITOR.paused += 1
            try:
                return __orig(self, *args, **kwargs)
            finally:
                MONITOR.paused -= 1

        cls.run = run


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that records every non-allowed aten op the candidate runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if MONITOR.active and not MONITOR.paused:
                name = str(getattr(func, "__name__", func))
                if not _is_allowed(name):
                    MONITOR.torch_ops.add(name)
            return func(*args, **(kwargs or {}))

    return _Watch()


def sentinels() -> dict[str, int]:
    """Identities of the functions a candidate would patch to fool the harness.

    Checked after every candidate: a change means the candidate tampered with the runtime, and the
    warm worker must be thrown away before it judges anyone else.
    """
    import torch

    targets = {
        "Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "Event.record": torch.cuda.Event.record,
        "cuda.synchronize": torch.cuda.synchronize,
        "torch.equal": torch.equal,
        "torch.allclose": torch.allclose,
        "Tensor.clone": torch.Tensor.clone,
        "Tensor.copy_": torch.Tensor.copy_,
        "Tensor.cpu": torch.Tensor.cpu,
        "Tensor.to": torch.Tensor.to,
        "Tensor.contiguous": torch.Tensor.contiguous,
    }
    return {k: id(v) for k, v in targets.items()}
