"""One checked call's buffers -> what the worker observed of it (aliasing, mutation, structure).

The worker reuses a case's buffers with fresh values written in (`refill`) and, after a checked
call, reports what the candidate did besides its values: outputs that alias inputs, inputs it
changed without the task declaring them mutated, launches and torch ops the guards saw. Standard
library and torch only (the worker imports it; its globals are watched by the sentinels through
`main._HARNESS`).
"""
from __future__ import annotations

import inspect
from typing import Any

import torch

from kbx_ray.evaluate.reply import CallReport
from kbx_ray.evaluate.worker import ledger, recorder, rotation
from kbx_ray.evaluate.worker.outputs import flatten_output, structure
from kbx_ray.evaluate.common.trees import tensors


# dtypes whose values torch compares on every device; any other (bits16, float8, uint32, ...) is
# compared byte for byte, so an output of such a dtype never makes the worker raise
_COMPARABLE = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64,
                         torch.complex64, torch.complex128, torch.bool, torch.uint8, torch.int8,
                         torch.int16, torch.int32, torch.int64})


def same(a: Any, b: Any) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype not in _COMPARABLE:
        try:
            return bool(torch.equal(a.contiguous().view(torch.uint8),
                                    b.contiguous().view(torch.uint8)))
        except (RuntimeError, TypeError):  # no byte view (sub-byte dtypes): not shown equal
            return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def is_one_of(t: Any, args: list[Any]) -> bool:
    """`t` is one of `args` itself, or a view with the very same elements."""
    return any(t is a or (t.data_ptr() == a.data_ptr() and t.dtype == a.dtype
                          and t.shape == a.shape and t.stride() == a.stride()) for a in args)


def refill(old: tuple, new: tuple) -> bool:
    """Write `new`'s tensor values into `old`'s buffers; False when their layouts differ."""
    if not rotation.same_layout(old, new, scalars):
        return False
    for x, y in zip(tensors(old), tensors(new)):
        x.copy_(y)
    return True


def scalars(obj: Any) -> list[Any]:
    """The non-tensor leaves of an argument tree, dict items by sorted key with their keys (tuples
    and lists alike, None kept): what must be equal for one input set's buffers to take
    another's values. Not `trees.tensors`' walk: that one drops exactly these leaves."""
    if isinstance(obj, torch.Tensor):
        return []
    if isinstance(obj, (list, tuple)):
        return [s for x in obj for s in scalars(x)]
    if isinstance(obj, dict):
        return [(k, scalars(v)) for k, v in sorted(obj.items())]
    return [obj]


def observe(out: Any, args: tuple, kwargs: dict, pristine: list[Any], sig: inspect.Signature | None,
            mutates: tuple[str, ...], device: str,
            side0: int) -> tuple[CallReport, list[Any], list[Any]]:
    """(observations, returned tensors, declared-mutated arguments) of the call that returned
    `out` on `args`/`kwargs`, whose input tensors held `pristine` before it. The report's
    outputs are filled in by the caller once encoded (`handlers.Worker.run`)."""
    returned = flatten_output(out, device)
    bound = sig.bind(*args, **kwargs).arguments if sig else {}
    mutated_args = [bound[m] for m in mutates if m in bound]
    inputs = tensors((args, kwargs))
    ledger.MONITOR.finish(returned, mutated_args, inputs)  # only kernels write results
    info = CallReport(
        launches=int(ledger.MONITOR.launches),
        # every output empty or an exact copy of an input: a call that owes no launch
        launch_free=bool(ledger.MONITOR.launch_free),
        torch_ops=tuple(sorted(ledger.MONITOR.torch_ops)),
        # an output that IS a declared-mutated argument (in-place and `out=` contracts)
        aliased=any(rotation.overlaps(o, t) for o in returned
                    if not is_one_of(o, mutated_args) for t in inputs),
        mutated=tuple(i for i, (t, p) in enumerate(zip(inputs, pristine))
                      if not any(t is m for m in mutated_args) and not same(t, p)),
        structure=structure(out),
        side_stream_launches=int(ledger.MONITOR.side_launches - side0),
        stream_changed=device == "cuda"
        and torch.cuda.current_stream() != torch.cuda.default_stream(),
        tampered=(),
        program=recorder.RECORDER.finish(returned + mutated_args),  # what the replay judges
    )
    return info, returned, mutated_args
