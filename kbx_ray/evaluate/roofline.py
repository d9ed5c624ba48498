"""Achieved bandwidth and compute rate per case, and their fraction of the hardware's peak.

A fraction above 1 is physically impossible, so it is also an integrity check: the parent rejects a
timing that claims to beat speed-of-light.
"""
from __future__ import annotations

from typing import Any


def roofline(cost: dict[str, float], ms: float, peak_gbps: float,
             peak_tflops: float) -> tuple[float, float, float | None]:
    """(GB/s, TFLOP/s, SOL fraction). SOL is None when the pool has no peaks (CPU)."""
    if ms <= 0:
        return 0.0, 0.0, None
    gbps = float(cost.get("bytes", 0)) / (ms * 1e-3) / 1e9
    tflops = float(cost.get("flops", 0)) / (ms * 1e-3) / 1e12
    fracs = []
    if peak_gbps > 0:
        fracs.append(gbps / peak_gbps)
    if peak_tflops > 0:
        fracs.append(tflops / peak_tflops)
    return gbps, tflops, (max(fracs) if fracs else None)


def case_dtype(case: dict[str, Any]) -> str:
    """The dtype whose peak bounds a case: its declared compute dtype, else float32."""
    return str(case.get("compute_dtype") or case.get("dtype") or "float32")
