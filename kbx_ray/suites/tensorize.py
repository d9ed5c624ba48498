"""A reference's non-tensor return (an optimizer, a dict, a scalar, a complex tensor) -> a tuple of
plain real tensors, the only outputs the evaluator compares.
More: kbx_ray/suites/README.md, `tensorize.py`.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
from typing import Any, Callable

import torch

from kbx_ray.suites import shim


def plain(out: Any) -> bool:
    """Already what the evaluator compares: a real tensor, a tuple or list of them, or None."""
    def real(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and not t.is_complex()
    return out is None or real(out) or (isinstance(out, (tuple, list)) and all(map(real, out)))


def to_tensors(obj: Any, inputs: tuple = ()) -> tuple[torch.Tensor, ...]:
    """Numbers land on the inputs' device (the GPU when there are none and one exists)."""
    out: list[torch.Tensor] = []
    given = shim.tensors(inputs)
    device = given[0].device if given else torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    _walk(obj, out, device)
    return tuple(out)


def _const(value: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A 0-d tensor made by `torch.full` alone: an allocation of a constant, which the worker's
    guards let a candidate's call do (a copy such as `torch.tensor` may not write an output)."""
    return torch.full((), value, dtype=dtype, device=device)


def _walk(obj: Any, out: list[torch.Tensor], device: torch.device) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        out.append(torch.view_as_real(t.resolve_conj()) if t.is_complex() else t)
    elif obj is None:
        out.append(torch.empty(0, dtype=torch.float64, device=device))
    elif isinstance(obj, bool):
        out.append(_const(obj, torch.bool, device))
    elif isinstance(obj, int):
        out.append(_const(obj, torch.int64, device))
    elif isinstance(obj, float):
        out.append(_const(obj, torch.float64, device))
    elif isinstance(obj, complex):
        out += [_const(obj.real, torch.float64, device), _const(obj.imag, torch.float64, device)]
    elif isinstance(obj, str):  # a stable digest (hash() differs between processes)
        digest = hashlib.sha256(obj.encode()).digest()[:7]
        out.append(_const(int.from_bytes(digest, "big"), torch.int64, device))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _walk(x, out, device)
    elif isinstance(obj, dict):
        keys = sorted(obj, key=str)
        _walk(",".join(map(str, keys)), out, device)
        for k in keys:
            _walk(obj[k], out, device)
    elif isinstance(getattr(obj, "defaults", None), dict) and hasattr(obj, "param_groups"):
        _walk(dict(obj.defaults), out, device)
        state = getattr(obj, "state", {}) or {}
        for value in state.values():
            _walk(dict(value) if isinstance(value, dict) else value, out, device)
    else:
        raise TypeError(f"returned a {type(obj).__name__}, which has no tensor form "
                        "(expected tensors, numbers, tuples, dicts or an optimizer)")


def wrap(fn: Callable[..., Any], sig: inspect.Signature) -> Callable[..., Any]:
    """`fn` whose return is `to_tensors` of what it returned, showing `sig` (the reference's)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return to_tensors(fn(*args, **kwargs), (*args, *kwargs.values()))
    call.__signature__ = sig  # type: ignore[attr-defined]
    return call
