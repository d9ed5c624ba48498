"""Identities of everything a candidate would patch to fool the harness, and a test that none
changed: the worker asks after every call and import, and a change is fatal (the warm worker is
thrown away before it judges anyone else). Standard library, torch and triton only.
"""
from __future__ import annotations

import operator
from typing import Any

from kbx_ray.evaluate.worker.ledger import Monitor


def _guard_namespaces() -> tuple[dict[str, Any], ...]:
    """The globals of the runtime guards' modules and of the tensor walk they rely on."""
    from kbx_ray.evaluate.common import trees
    from kbx_ray.evaluate.worker import (aten_ops, bounds_checker, copy_rules, dispatch_monitor,
                                         frames, host_values, ledger, marked_numbers, recorder,
                                         storages, triton_hooks, value_readers)

    return tuple(vars(m) for m in (aten_ops, ledger, copy_rules, storages, frames,
                                   dispatch_monitor, value_readers, triton_hooks, bounds_checker,
                                   trees, host_values, marked_numbers, recorder)) + (globals(),)


def _library_namespaces() -> dict[str, Any]:
    import builtins
    import json
    import time

    import torch
    import triton.runtime.jit as jit
    from torch.utils import _pytree

    spaces: dict[str, Any] = {"builtins": vars(builtins), "torch": vars(torch),
                              "time": vars(time), "json": vars(json),
                              "torch.cuda": vars(torch.cuda), "JITFunction": vars(jit.JITFunction),
                              "Monitor": vars(Monitor), "Event": vars(torch.cuda.Event),
                              "pytree": vars(_pytree)}
    for cls in torch.Tensor.__mro__[:-1]:
        spaces[f"Tensor:{cls.__name__}"] = vars(cls)
    try:
        from triton.runtime import interpreter as it

        for name in ("InterpreterBuilder", "GridExecutor", "InterpretedFunction",
                     "FunctionRewriter"):
            spaces[name] = vars(getattr(it, name))
    except ImportError:  # pragma: no cover
        pass
    return spaces


class Sentinels:
    """Identities of everything a candidate would patch to fool the harness.

    Library namespaces (builtins, torch, torch.Tensor and its bases, torch.cuda, the Triton
    launchers and interpreter, time, json, torch's pytree) are watched by the identity of their
    callables, the harness's own module globals (`harness`, plus the guards' modules and the
    tensor walk, `trees.py`) by the identity of every value, and classes by their number of names
    too (`T.clone = f` adds a name that shadows TensorBase.clone). pytree's node registry is
    watched entry by entry and by its size: a node type registered for a tensor would hide it
    from every walk. After each call the worker asks `changed()`: anything replaced, deleted or
    added to a class means the candidate tampered with the runtime, and the warm worker is thrown
    away before it judges anyone else. Modules may gain names: torch adds lazily imported
    submodules as it goes.
    """

    def __init__(self, harness: tuple[dict[str, Any], ...] = ()) -> None:
        from torch.utils._pytree import SUPPORTED_NODES

        spaces = _library_namespaces()
        watched = [(s, ns, [k for k, v in list(ns.items()) if callable(v)
                            or isinstance(v, (staticmethod, classmethod, property))])
                   for s, ns in spaces.items()]
        watched += [(f"harness{i}", ns, list(ns))
                    for i, ns in enumerate((*_guard_namespaces(), *harness))]
        watched.append(("pytree.SUPPORTED_NODES", SUPPORTED_NODES, list(SUPPORTED_NODES)))
        self.groups = [(s, ns, keys, operator.itemgetter(*keys), tuple(ns[k] for k in keys))
                       for s, ns, keys in watched if len(keys) > 1]
        self.sizes = [(s, ns, len(ns)) for s, ns in spaces.items()
                      if isinstance(ns, type(vars(Monitor)))]
        self.sizes.append(("pytree.SUPPORTED_NODES", SUPPORTED_NODES, len(SUPPORTED_NODES)))

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
