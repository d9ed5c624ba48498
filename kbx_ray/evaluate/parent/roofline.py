"""Achieved bandwidth and compute rate per case, and their fraction of the hardware's peak.

A fraction above 1 is physically impossible, so it is also an integrity check: the parent rejects a
timing that claims to beat speed-of-light.
More: kbx_ray/evaluate/parent/README.md, `roofline.py`.
"""
from __future__ import annotations

from typing import Any


def roofline(cost: dict[str, float], ms: float, peak_gbps: float,
             peak_tflops: float) -> tuple[float, float, float | None]:
    """(GB/s, TFLOP/s, SOL fraction) from `bytes` and `flops` (never `min_bytes`/`min_flops`:
    these are the figures reported). SOL is None when the pool has no peaks (CPU)."""
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


def floor_fraction(cost: dict[str, float], ms: float, peak_gbps: float,
                   peak_tflops: float) -> float | None:
    """The fraction of peak that the least work any correct kernel must do (`min_bytes`, else
    `bytes`; `min_flops`, else `flops`) takes in `ms`: above 1 (`sol_limit`) the timing is
    impossible. None when the pool has no peaks (CPU)."""
    floor = {"flops": cost.get("min_flops", cost.get("flops", 0)),
             "bytes": cost.get("min_bytes", cost.get("bytes", 0))}
    return roofline(floor, ms, peak_gbps, peak_tflops)[2]


def compute_dtype(inputs: Any) -> str:
    """The dtype whose peak bounds a case: that of its first floating or int8 input tensor.

    float32 maps to tf32, the fastest rate a Triton kernel may legally reach on fp32 inputs
    (tl.dot uses TF32 by default): bounding by the CUDA-core fp32 figure would call a correct
    tensor-core kernel impossible.
    """
    import torch

    from kbx_ray.evaluate.common.trees import tensors

    for x in tensors(inputs):  # depth first, dicts in insertion order
        if x.dtype in (torch.int8, torch.uint8):
            return "int8"
        if x.dtype in (torch.float16, torch.bfloat16):
            return str(x.dtype).replace("torch.", "")
        if x.dtype == torch.float32:
            return "tf32"
    return "float32"
