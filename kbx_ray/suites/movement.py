"""A reference -> its task's kinds: whether it is data movement, by the aten ops it runs (not by
its name, category or cost), and which inputs are structure (`structure`).
More: kbx_ray/suites/README.md, `movement.py`.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kbx_ray.evaluate.worker.aten_ops import ALLOC, CONST_FILLS, META, MOVES, VIEWS

# Ops that only move values (or make constants): what a data-movement reference may run.
MOVING = ALLOC | META | MOVES | VIEWS | frozenset({n.split(".")[0] for n in CONST_FILLS}) | frozenset(
    """cat stack hstack vstack index_select gather index _unsafe_index take flip roll repeat tril triu
    diag_embed diagonal_copy narrow_copy slice_scatter select_scatter diagonal_scatter scatter index_copy
    index_put index_put_ _index_put_impl_ index_fill index_fill_ masked_fill masked_fill_ repeat_interleave
    permute_copy expand_copy view_copy _reshape_copy split_copy unbind_copy squeeze_copy unsqueeze_copy
    t_copy transpose_copy as_strided_copy alias_copy unfold_copy copy fill zero clone_ pad
    constant_pad_nd reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d""".split())


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.add(str(func.__name__).split(".")[0])
        return func(*args, **(kwargs or {}))


def _size(call: Any) -> int:
    return sum(t.numel() for t in _tensors((call.args, call.kwargs)))


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors(x)]
    return []


def _clone(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(x) for x in obj)
    return obj


TRACE_LIMIT = 1 << 22  # elements: calls above it are not traced (the smallest always is)


def decide(reference: Callable[..., Any], calls: list[Any]) -> tuple[bool, str]:
    """(is data movement, why): the aten ops `reference` runs on its recorded calls (with
    `.args`/`.kwargs`), the smallest one and every other up to `TRACE_LIMIT` elements (a
    smallest call can be degenerate: an optimizer step on parameters without gradients)."""
    if not calls:
        return False, "no recorded call"
    smallest = min(calls, key=_size)
    mode = _Ops()
    try:
        with mode:
            for call in (c for c in calls if c is smallest or _size(c) <= TRACE_LIMIT):
                reference(*_clone(call.args), **_clone(call.kwargs))
    except Exception as x:  # noqa: BLE001 - the problem's own code: not known to be movement
        return False, f"the reference did not run traced ({type(x).__name__})"
    return _verdict(mode.names)


def decide_forward(build: Callable[[], tuple[Callable[..., Any], tuple]]) -> tuple[bool, str]:
    """(is data movement, why) of a module problem (KernelBench's `Model`): `build()` makes the
    model and its inputs, under `torch.device("meta")` (no data: a 16k-square input costs
    nothing), and only the forward is traced (weight initialisers compute)."""
    try:
        with torch.device("meta"):
            forward, inputs = build()
            mode = _Ops()
            with mode, torch.no_grad():
                forward(*inputs)
    except Exception as x:  # noqa: BLE001 - data-dependent or device-bound code: not known
        return False, f"the reference did not run traced ({type(x).__name__})"
    return _verdict(mode.names)


def _verdict(names: set[str]) -> tuple[bool, str]:
    computing = sorted(names - MOVING)
    if computing:
        return False, f"the reference computes ({', '.join(computing[:4])})"
    if not names:
        return False, "the reference dispatches no aten op"
    return True, f"the reference only moves data ({', '.join(sorted(names)[:6])})"


def structure(reference: Callable[..., Any], sig: Any, calls: list[Any]) -> tuple[str, ...]:
    """The parameters whose tensor values shape the reference's output (tasks/README.md,
    `STRUCTURE`): an integer or bool tensor argument of the smallest call whose change (ints + 1,
    bools all true or all false) changes an output's shape (repeat_interleave's repeats, masked_select's
    mask). Index arguments that the change puts out of range raise, and stay values."""
    if not calls:
        return ()
    call = min(calls, key=_size)
    bound = sig.bind(*call.args, **call.kwargs).arguments

    def shapes(arguments: dict) -> list | None:
        try:
            out = reference(**_clone(arguments)) if not _positional(sig) else None
        except Exception:  # noqa: BLE001 - an index put out of range: not a structure input
            return None
        return [tuple(t.shape) for t in _tensors(out)]
    base = shapes(bound)
    found = []
    for name, v in bound.items():
        if isinstance(v, torch.Tensor) and v.numel() and not (v.is_floating_point() or v.is_complex()):
            changes = [torch.ones_like(v), torch.zeros_like(v)] if v.dtype == torch.bool else [v + 1]
            if base is not None and any((got := shapes({**bound, name: c})) is not None and got != base
                                        for c in changes):
                found.append(name)
    return tuple(found)


def _positional(sig: Any) -> bool:
    """A parameter that can only be passed by position (`def f(x, /)`): the call cannot be rebound
    by name, so no structure is inferred."""
    return any(p.kind is p.POSITIONAL_ONLY or p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
