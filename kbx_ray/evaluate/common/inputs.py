"""Seeded task inputs, made once and handed out as fresh copies.

A task's `make_inputs` draws on the device with a seeded generator (tasks/README.md). Inputs depend
only on (task, case, seed, device), so both the parent and the worker keep them, and each call gets a
copy with the same sizes and strides: fresh memory, the same values. Standard library and torch only
(the worker imports this).
"""
from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any

import torch

from kbx_ray.evaluate.common.trees import tensors


def fresh_copy(obj: Any) -> Any:
    """The same sizes, strides and values in fresh memory (storage offset 0), as each call gets."""
    if isinstance(obj, torch.Tensor):
        out = torch.empty_strided(obj.size(), obj.stride(), dtype=obj.dtype, device=obj.device)
        return out.copy_(obj)
    if isinstance(obj, tuple):
        return tuple(fresh_copy(x) for x in obj)
    if isinstance(obj, list):
        return [fresh_copy(x) for x in obj]
    if isinstance(obj, dict):
        return {k: fresh_copy(v) for k, v in obj.items()}
    return obj


def _nbytes(obj: Any) -> int:
    """The bytes of the storages behind `obj`'s tensors (a shared storage counts each time)."""
    return sum(t.untyped_storage().nbytes() for t in tensors(obj))


class InputCache:
    """LRU of pristine inputs keyed by (task key, case name, seed), bounded in bytes."""

    def __init__(self, max_bytes: int = 4 << 30) -> None:
        self.max_bytes = max_bytes
        self.limit: int | None = None  # a tighter cap for the running evaluation (the parent's)
        self.items: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = 0

    def get(self, module: Any, task_key: str, case: dict, seed: int, device: str) -> tuple[tuple, dict]:
        key = (task_key, case["name"], seed, device)
        if key in self.items:
            self.items.move_to_end(key)
            self.hits += 1
            return fresh_copy(self.items[key][0])
        self.misses += 1
        pristine = module.make_inputs(case, seed, device)
        size = _nbytes(pristine)
        cap = self.max_bytes if self.limit is None else min(self.max_bytes, self.limit)
        if size <= cap // 4:
            self.items[key] = (pristine, size)
            self.bytes += size
            while self.bytes > cap:
                _, (_, old) = self.items.popitem(last=False)
                self.bytes -= old
            return fresh_copy(pristine)
        return pristine

    def clear(self) -> None:
        self.items.clear()
        self.bytes = 0


def _layouts(obj: Any) -> list[tuple]:
    return [(tuple(t.shape), t.stride(), t.dtype) for t in tensors(obj)]


def replay_inputs(cache: InputCache, module: Any, task_key: str, case: dict, seed: int,
                  fresh: int, device: str, entry: str) -> tuple[tuple, dict, int]:
    """The inputs a replay runs on: the recorded call's (`seed`) with every tensor parameter's
    values drawn afresh (`fresh`), except the task's STRUCTURE parameters (values that shape an
    output or a grid) and any whose layout changes with the seed (a drawn length); non-tensor
    arguments stay as recorded. Also how many parameters were drawn afresh."""
    old_a, old_k = cache.get(module, task_key, case, seed, device)
    new_a, new_k = cache.get(module, task_key, case, fresh, device)
    sig = inspect.signature(getattr(module, entry))
    old, new = sig.bind(*old_a, **old_k), sig.bind(*new_a, **new_k)
    keep = set(getattr(module, "STRUCTURE", ()))
    drawn = 0
    for name, value in old.arguments.items():
        other = new.arguments.get(name)
        if (name in keep or not tensors(value) or _layouts(value) != _layouts(other)
                or _scalars(value) != _scalars(other)):
            new.arguments[name] = value
        else:
            drawn += 1
    return tuple(new.args), dict(new.kwargs), drawn


def _scalars(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return [s for x in obj for s in _scalars(x)]
    if isinstance(obj, dict):
        return [(k, _scalars(v)) for k, v in sorted(obj.items())]
    return [] if hasattr(obj, "data_ptr") else [obj]
