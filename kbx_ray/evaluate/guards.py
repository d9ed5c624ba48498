"""Runtime guards inside the sandbox worker: launches, aten compute, memory bounds, tampering.

They complement the static checks: a candidate can hide a torch call from the AST (a method call on
a tensor looks like any other call), but not from the dispatcher. Triton launches are counted by
wrapping the launcher classes, and the dispatch monitor is paused while a Triton kernel runs,
because the CPU interpreter itself moves data with aten ops. Under the interpreter every load and
store is also bounds-checked against the tensors the kernel was given. Standard library, torch and
(with triton's interpreter) numpy only.
"""
from __future__ import annotations

import operator
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
        self.spans: list[tuple[int, int]] = []   # byte ranges of the current launch's tensors

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


def install_bounds_checker() -> None:
    """Under the interpreter, fail a load or store whose active lanes leave every tensor argument.

    On a GPU such an access reads a neighbour's memory or faults; under the interpreter it reads or
    corrupts the worker's own heap, silently. A missing mask or an off-by-one bound then passes on
    values alone, so the access itself is checked where it happens.
    """
    import numpy as np
    from triton.runtime import interpreter as it

    init = it.GridExecutor._init_args_hst

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        spans = []
        for t in _tensors_of((args_hst, kwargs_hst)):
            st = t.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        MONITOR.spans = spans
        return args_hst, kwargs_hst

    def check(ptrs: Any, mask: Any, what: str) -> None:
        p = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        m = (np.ones(p.shape, bool) if mask is None
             else np.broadcast_to(np.asarray(mask.data, bool), p.shape))
        active = p[m]
        if active.size == 0 or not MONITOR.spans:
            return
        size = np.uint64(it._get_np_dtype(ptrs.get_element_ty()).itemsize)
        ok = np.zeros(active.shape, bool)
        for lo, hi in MONITOR.spans:
            ok |= (active >= np.uint64(lo)) & (active + size <= np.uint64(hi))
        if not ok.all():
            raise IndexError(f"out-of-bounds {what}: {int((~ok).sum())} of {active.size} active "
                             "lanes address memory outside every tensor passed to the kernel "
                             "(a missing or wrong mask?)")

    b = it.InterpreterBuilder
    load, store, rmw = b.create_masked_load, b.create_masked_store, b.create_atomic_rmw

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "load")
        return load(self, ptrs, mask, *a)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *a)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptr, mask, "atomic")
        return rmw(self, op, ptr, value, mask, *a)

    b.create_masked_load, b.create_masked_store = create_masked_load, create_masked_store
    b.create_atomic_rmw = create_atomic_rmw
    it.GridExecutor._init_args_hst = _init_args_hst


def _tensors_of(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors_of(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors_of(x)]
    base = getattr(obj, "base", None)  # triton's TensorWrapper and TensorDescriptor
    return [base] if isinstance(base, torch.Tensor) else []


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that records every non-allowed aten op the candidate runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if MONITOR.active and not MONITOR.paused:
                name = str(getattr(func, "__name__", func))
                if not _is_allowed(name):
                    MONITOR.torch_ops.add(name)
            return func(*args, **(kwargs or {}))

    mode = _Watch()
    import torch

    with mode:  # the first entry imports torch._dynamo, which rewraps torch.manual_seed: do it now,
        torch.zeros(1).add_(1)  # before the sentinels are taken, outside any candidate's call
    return mode


class Sentinels:
    """Identities of everything a candidate would patch to fool the harness.

    Library namespaces (builtins, torch, torch.Tensor and its bases, torch.cuda, the Triton
    launchers and interpreter, time, json) are watched by the identity of their callables, the
    harness's own module globals (`harness`, plus this module's) by the identity of every value,
    and classes by their number of names too (`T.clone = f` adds a name that shadows
    TensorBase.clone). After each call the worker asks `changed()`: anything replaced, deleted or
    added to a class means the candidate tampered with the runtime, and the warm worker is thrown
    away before it judges anyone else. Modules may gain names: torch adds lazily imported
    submodules as it goes.
    """

    def __init__(self, harness: tuple[dict[str, Any], ...] = ()) -> None:
        import builtins
        import json
        import time

        import torch
        import triton.runtime.jit as jit

        spaces: dict[str, Any] = {"builtins": vars(builtins), "torch": vars(torch),
                                  "time": vars(time), "json": vars(json),
                                  "torch.cuda": vars(torch.cuda), "JITFunction": vars(jit.JITFunction),
                                  "Monitor": vars(Monitor), "Event": vars(torch.cuda.Event)}
        for cls in torch.Tensor.__mro__[:-1]:
            spaces[f"Tensor:{cls.__name__}"] = vars(cls)
        try:
            from triton.runtime import interpreter as it

            for name in ("InterpreterBuilder", "GridExecutor", "InterpretedFunction"):
                spaces[name] = vars(getattr(it, name))
        except ImportError:  # pragma: no cover
            pass
        watched = [(s, ns, [k for k, v in list(ns.items()) if callable(v)
                            or isinstance(v, (staticmethod, classmethod, property))])
                   for s, ns in spaces.items()]
        watched += [(f"harness{i}", ns, list(ns)) for i, ns in enumerate((globals(), *harness))]
        self.groups = [(s, ns, keys, operator.itemgetter(*keys), tuple(ns[k] for k in keys))
                       for s, ns, keys in watched if len(keys) > 1]
        self.sizes = [(s, ns, len(ns)) for s, ns in spaces.items()
                      if isinstance(ns, type(vars(Monitor)))]

    def changed(self) -> list[str]:
        """The names whose identity changed since construction (empty when nothing was touched).
        Each namespace is compared in one C-level pass; names are worked out only on a change."""
        out = []
        for s, ns, keys, get, orig in self.groups:
            try:
                same = get(ns) == orig  # items compare by identity first (C speed)
            except Exception:  # noqa: BLE001 - a deleted name, or a replacement with a strange __eq__
                same = False
            if not same:
                out += [f"{s}.{k}" for k, o in zip(keys, orig) if ns.get(k, _GONE) is not o]
        return out + [f"{s}.<names>" for s, ns, n in self.sizes if len(ns) != n]


_GONE = object()
