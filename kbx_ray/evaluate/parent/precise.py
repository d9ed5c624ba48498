"""Whose verdict is right when the candidate and a half-precision reference disagree.
More: kbx_ray/evaluate/parent/README.md, `precise.py`.
"""
from __future__ import annotations

from typing import Any

import torch

from kbx_ray.evaluate.parent.correctness import CHUNK, reference_outputs, tolerance_table
from kbx_ray.evaluate.common.trees import map_tensors

_WIDENED = (torch.float16, torch.bfloat16, torch.float32)


def _widen(t: torch.Tensor) -> torch.Tensor:
    """A float64 copy of a half/single-precision tensor; any other tensor cloned (the reference
    may write its inputs)."""
    return t.detach().to(torch.float64) if t.dtype in _WIDENED else t.detach().clone()


def float64_outputs(fn: Any, args: tuple, kwargs: dict, mutates: tuple) -> list[torch.Tensor] | None:
    """The reference `fn` on float64 copies of `args`/`kwargs`: the tensors judged, as
    `References._run` lists them (correctness.reference_outputs); None where it cannot run so."""
    try:
        with torch.no_grad():
            return reference_outputs(fn, map_tensors(_widen, args), map_tensors(_widen, kwargs),
                                     mutates)[1]
    except Exception:  # noqa: BLE001 - a reference that does not run in float64 has no second opinion
        return None


def admitted(outs: list[torch.Tensor], ref: list[torch.Tensor], exact: list[torch.Tensor] | None,
             task: Any) -> tuple[list[torch.Tensor], int]:
    """`ref` with every floating value the candidate got within the task's tolerance of the
    float64 answer `exact` replaced by the candidate's own (so the usual comparison passes it
    there and judges it against `ref` everywhere else), and how many values that admitted."""
    if exact is None or len(exact) != len(ref):
        return ref, 0
    table = tolerance_table(task)
    merged, count = [], 0
    for o, r, e in zip(outs, ref, exact):
        if (not r.is_floating_point() or tuple(o.shape) != tuple(r.shape)
                or tuple(e.shape) != tuple(r.shape) or o.dtype != r.dtype):
            merged.append(r)
            continue
        rtol, atol = table.get(str(r.dtype).replace("torch.", ""), (1e-5, 1e-5))
        of, rf, ef = o.reshape(-1), r.reshape(-1).clone(), e.reshape(-1).to(r.device)
        for s in range(0, rf.numel(), CHUNK):
            o64, r64, e64 = (x[s:s + CHUNK].double() for x in (of, rf, ef))
            near = ((o64 - e64).abs() <= atol + rtol * e64.abs()) & (o64 != r64) & e64.isfinite()
            count += int(near.sum())
            rf[s:s + CHUNK] = torch.where(near, of[s:s + CHUNK], rf[s:s + CHUNK])
        merged.append(rf.reshape(r.shape))
    return merged, count
