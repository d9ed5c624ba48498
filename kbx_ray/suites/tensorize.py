"""A reference's non-tensor return (an optimizer, a dict, a scalar, a complex tensor) -> a tuple of
plain real tensors, the only outputs the evaluator compares.

KernelBench-X compares whatever its test code stores in `test_results`: an optimizer's `defaults`,
tuples of tensors and numbers, plain Python numbers. The adapter applies the same function to the
reference's return (in the judge) and to the candidate's (in the worker, through the task's
`bind_candidate`), so both sides reach the comparison in one shape:
- a tensor stays (a complex one becomes `view_as_real`, so both parts are compared, not the real
  part alone); it is cloned when it is an input the task declares mutated (an in-place or `out=`
  op returning its argument, as its reference does, is compared by value, not refused as
  aliasing; any other input handed back still meets the evaluator's aliasing check);
- a number becomes a 0-d tensor (bool, int64, float64 or complex -> real pairs), None an empty
  float64 tensor, a string its UTF-8 bytes;
- a list or tuple is flattened in order; a dict becomes its sorted keys (as bytes) then its values;
- an object with a `defaults` dict and `param_groups` (an optimizer) becomes its defaults, then
  every tensor of its state: what the peer compares, and the moments a real step leaves behind.
Standard library, torch and shim.py only: it runs in the worker.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch

from kbx_ray.suites import shim


def plain(out: Any) -> bool:
    """Already what the evaluator compares: a real tensor, a tuple or list of them, or None."""
    def real(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and not t.is_complex()
    return out is None or real(out) or (isinstance(out, (tuple, list)) and all(map(real, out)))


def to_tensors(obj: Any, inputs: tuple = (), mutated: tuple = ()) -> tuple[torch.Tensor, ...]:
    """Numbers land on the inputs' device (the GPU when there are none and one exists); the
    `mutated` inputs, when returned, are returned as copies."""
    out: list[torch.Tensor] = []
    given = shim.tensors(inputs)
    device = given[0].device if given else torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    _walk(obj, out, {id(t) for t in shim.tensors(mutated)}, device)
    return tuple(out)


def _walk(obj: Any, out: list[torch.Tensor], inputs: set[int], device: torch.device) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        t = torch.view_as_real(t.resolve_conj()) if t.is_complex() else t
        out.append(t.clone() if id(obj) in inputs else t)
    elif obj is None:
        out.append(torch.empty(0, dtype=torch.float64, device=device))
    elif isinstance(obj, bool):
        out.append(torch.tensor(obj, device=device))
    elif isinstance(obj, int):
        out.append(torch.tensor(obj, dtype=torch.int64, device=device))
    elif isinstance(obj, float):
        out.append(torch.tensor(obj, dtype=torch.float64, device=device))
    elif isinstance(obj, complex):
        out.append(torch.tensor([obj.real, obj.imag], dtype=torch.float64,
                                device=device))
    elif isinstance(obj, str):
        out.append(torch.tensor(list(obj.encode()), dtype=torch.uint8, device=device))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _walk(x, out, inputs, device)
    elif isinstance(obj, dict):
        keys = sorted(obj, key=str)
        _walk(",".join(map(str, keys)), out, inputs, device)
        for k in keys:
            _walk(obj[k], out, inputs, device)
    elif isinstance(getattr(obj, "defaults", None), dict) and hasattr(obj, "param_groups"):
        _walk(dict(obj.defaults), out, inputs, device)
        state = getattr(obj, "state", {}) or {}
        for value in state.values():
            _walk(dict(value) if isinstance(value, dict) else value, out, inputs, device)
    else:
        raise TypeError(f"returned a {type(obj).__name__}, which has no tensor form "
                        "(expected tensors, numbers, tuples, dicts or an optimizer)")


def wrap(fn: Callable[..., Any], sig: inspect.Signature, mutates: tuple[str, ...] = ()
         ) -> Callable[..., Any]:
    """`fn` whose return is `to_tensors` of what it returned; `sig` (the reference's) names the
    arguments, and is the signature the wrapper shows."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        bound = sig.bind(*args, **kwargs).arguments
        out = fn(*args, **kwargs)
        return to_tensors(out, (*args, *kwargs.values()),
                          tuple(bound[m] for m in mutates if m in bound))
    call.__signature__ = sig  # type: ignore[attr-defined]
    return call
