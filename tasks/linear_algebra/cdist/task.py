"""Pairwise Euclidean distances between two sets of points (cdist, p = 2).

Implement `cdist(x1, x2)`: for float32 `x1` [B, P, M] (B batches of P points in M dimensions) and
float32 `x2` [B, R, M], return a new float32 tensor `out` [B, P, R] with

    out[b, i, j] = sqrt(sum over k of (x1[b, i, k] - x2[b, j, k]) ** 2)

This is `torch.cdist(x1, x2, p=2.0, compute_mode="donot_use_mm_for_euclid_dist")`: the direct
sum of squared differences.

- B, P, R, M are arbitrary (any may be 1). Compute in full float32 (no TF32 or lower-precision
  tensor-core products).
- Some points of x2 are exact copies of points of x1, whose distance must come out as 0 (within
  the tolerance). The expansion |x|^2 + |y|^2 - 2 x.y loses those to cancellation (errors of about
  1e-3 after the square root), so it does not pass unless the differences are formed directly.
- `x1` and `x2` may be non-contiguous (for example the first M columns of wider tensors). Inputs
  must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4.
"""
import torch

CATEGORY = "LinearAlgebra"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-4)}


def cdist(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.cdist(x1, x2, p=2.0, compute_mode="donot_use_mm_for_euclid_dist")


CASES = [
    {"name": "small", "small": True, "b": 1, "p": 30, "r": 40, "m": 16},
    {"name": "batched_odd_small", "small": True, "b": 3, "p": 17, "r": 9, "m": 5},
    {"name": "m1_small", "small": True, "b": 2, "p": 33, "r": 20, "m": 1},
    {"name": "single_point_small", "small": True, "b": 1, "p": 1, "r": 50, "m": 20},
    {"name": "sliced_outliers_small", "small": True, "b": 2, "p": 24, "r": 31, "m": 12, "sliced": True,
     "outliers": True},
    {"name": "b4_4096x4096_m64", "small": False, "b": 4, "p": 4096, "r": 4096, "m": 64},
    {"name": "b1_10000x3000_m3_outliers", "small": False, "b": 1, "p": 10000, "r": 3000, "m": 3,
     "outliers": True},
    {"name": "b16_1000x1001_m128_sliced", "small": False, "b": 16, "p": 1000, "r": 1001, "m": 128,
     "sliced": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal coordinates (outliers: 0.1% scaled by 10) plus a common offset of 3 per
    batch, so the points sit away from the origin. Every 7th point of x2 is a copy of a point of
    x1 (exact zero distances). A sliced case returns the first M columns of tensors 3 wider."""
    g = torch.Generator(device).manual_seed(seed)
    b, p, r, m = case["b"], case["p"], case["r"], case["m"]
    w = m + 3 if case.get("sliced") else m
    offset = 3 * torch.randn(b, 1, w, generator=g, device=g.device)
    x1 = torch.randn(b, p, w, generator=g, device=g.device) + offset
    x2 = torch.randn(b, r, w, generator=g, device=g.device) + offset
    if case.get("outliers"):
        x1 = torch.where(torch.rand(b, p, w, generator=g, device=g.device) < 0.001, x1 * 10, x1)
        x2 = torch.where(torch.rand(b, r, w, generator=g, device=g.device) < 0.001, x2 * 10, x2)
    src = torch.randint(0, p, (r,), generator=g, device=g.device)
    copy = (torch.arange(r, device=device) % 7 == 0)[None, :, None]
    x2 = torch.where(copy, x1[:, src, :], x2)
    x1, x2 = x1.to(device), x2.to(device)
    if case.get("sliced"):
        x1, x2 = x1[..., :m], x2[..., :m]
    return (x1, x2), {}


def cost(case: dict) -> dict:
    b, p, r, m = case["b"], case["p"], case["r"], case["m"]
    return {"flops": 3 * b * p * r * m, "bytes": 4 * b * (p * m + r * m + p * r)}
