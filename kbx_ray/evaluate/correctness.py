"""The verdict: candidate outputs against reference outputs, computed in the trusted parent.

The candidate's outputs arrive as bytes from the worker; the reference runs here, in a process the
candidate never touched, so no patch of torch or of the checker can reach this comparison.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7), "float16": (5e-3, 5e-3),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass
class Verdict:
    ok: bool
    kind: str = ""          # ErrorKind when not ok
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0


def flatten(out: Any) -> list[torch.Tensor]:
    if out is None:
        return []
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out]


def compare(out: list[torch.Tensor], ref: list[torch.Tensor], task: Any, case: dict) -> Verdict:
    """Shape, dtype and NaN placement exactly; values by the task's check or tolerance."""
    if len(out) != len(ref):
        return Verdict(False, "shape_mismatch", f"{len(out)} outputs, expected {len(ref)}")
    for i, (o, r) in enumerate(zip(out, ref)):
        if tuple(o.shape) != tuple(r.shape):
            return Verdict(False, "shape_mismatch",
                           f"output {i}: shape {list(o.shape)}, expected {list(r.shape)}")
        if o.dtype != r.dtype:
            return Verdict(False, "dtype_mismatch", f"output {i}: dtype {o.dtype}, expected {r.dtype}")
    custom = getattr(task, "check", None)
    if custom is not None:
        why = custom(list(out), list(ref), case)  # on the evaluation device (tasks/README.md)
        return Verdict(False, "mismatch", f"task check: {why}") if why else Verdict(True)
    worst = Verdict(True)
    table = {**DEFAULT_TOLERANCE, **getattr(task, "TOLERANCE", {})}
    for i, (o, r) in enumerate(zip(out, ref)):
        v = _close(o, r, table)
        worst.max_abs_err = max(worst.max_abs_err, v.max_abs_err)
        worst.max_rel_err = max(worst.max_rel_err, v.max_rel_err)
        if not v.ok:
            v.message = f"output {i}: {v.message}"
            v.max_abs_err, v.max_rel_err = worst.max_abs_err, worst.max_rel_err
            return v
    return worst


def _close(o: torch.Tensor, r: torch.Tensor, table: dict[str, tuple[float, float]]) -> Verdict:
    name = str(r.dtype).replace("torch.", "")
    if not (r.is_floating_point() or r.is_complex()):
        bad = o != r
        if bool(bad.any()):
            idx = [int(i) for i in bad.nonzero()[0]]
            return Verdict(False, "mismatch", f"{int(bad.sum())} of {r.numel()} integer values differ "
                                              f"(first at {idx}: {o[tuple(idx)]} vs {r[tuple(idx)]})")
        return Verdict(True)
    rtol, atol = table.get(name, (1e-5, 1e-5))
    o64, r64 = o.double(), r.double()
    nan_o, nan_r = o64.isnan(), r64.isnan()
    if not torch.equal(nan_o, nan_r):
        return Verdict(False, "mismatch", "NaNs in different places")
    inf_r = r64.isinf()
    if not torch.equal(o64.isinf() & (o64 == r64), inf_r):
        return Verdict(False, "mismatch", "Infs differ")
    finite = ~(nan_r | inf_r)
    diff = (o64 - r64).abs().where(finite, torch.zeros_like(o64))
    rel = diff / r64.abs().clamp_min(1e-12)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float(rel.where(finite, torch.zeros_like(rel)).max()) if rel.numel() else 0.0
    bad = diff > atol + rtol * r64.abs().where(finite, torch.zeros_like(r64))
    if bool(bad.any()):
        idx = [int(i) for i in bad.nonzero()[0]]
        return Verdict(False, "mismatch",
                       f"{int(bad.sum())} of {r.numel()} values outside rtol={rtol} atol={atol}; "
                       f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g}; first bad index {idx}: "
                       f"{float(o64[tuple(idx)]):.6g} vs {float(r64[tuple(idx)]):.6g}", max_abs, max_rel)
    return Verdict(True, max_abs_err=max_abs, max_rel_err=max_rel)
