"""Batched matrix-vector product.

Implement `batched_matvec(a, x)`: for a float32 batch of matrices `a` [B, M, N] and a float32
batch of vectors `x` [B, N], return a new float32 tensor `y` [B, M] with

    y[b, i] = sum over j of a[b, i, j] * x[b, j]

This is `torch.matmul(a, x.unsqueeze(-1)).squeeze(-1)`.

- B, M, N are arbitrary (any may be 1). Accumulate in float32 (no TF32 or lower precision).
- `a` may be non-contiguous: row-major matrices, or column-major ones (the transpose of the last
  two dimensions of a contiguous [B, N, M] tensor). Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is
free). Entries are scaled by N**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def batched_matvec(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.matmul(a, x.unsqueeze(-1)).squeeze(-1)


CASES = [
    {"name": "small", "small": True, "b": 4, "m": 16, "n": 100},
    {"name": "odd_small", "small": True, "b": 3, "m": 33, "n": 17},
    {"name": "batch1_small", "small": True, "b": 1, "m": 5, "n": 1000},
    {"name": "n1_small", "small": True, "b": 7, "m": 40, "n": 1},
    {"name": "column_major_outliers_small", "small": True, "b": 2, "m": 50, "n": 64, "column_major": True,
     "outliers": True},
    {"name": "m1_small", "small": True, "b": 3, "m": 1, "n": 50},
    {"name": "batch_128x1024x512", "small": False, "b": 128, "m": 1024, "n": 512},
    {"name": "batch_4096x64x96_outliers", "small": False, "b": 4096, "m": 64, "n": 96, "outliers": True},
    {"name": "column_major_32x2000x1000", "small": False, "b": 32, "m": 2000, "n": 1000, "column_major": True},
    {"name": "batch_8x4096x4097", "small": False, "b": 8, "m": 4096, "n": 4097},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by N**-0.25 (outliers: 0.1% scaled by 10). A column_major
    case draws [B, N, M] and returns `.transpose(1, 2)`."""
    g = torch.Generator(device).manual_seed(seed)
    b, m, n = case["b"], case["m"], case["n"]
    cm = case.get("column_major", False)
    s = n ** -0.25
    a = normal(g, [b, n, m] if cm else [b, m, n], case.get("outliers", False)) * s
    x = normal(g, [b, n], False) * s
    a, x = a.to(device), x.to(device)
    if cm:
        a = a.transpose(1, 2)
    return (a, x), {}


def cost(case: dict) -> dict:
    b, m, n = case["b"], case["m"], case["n"]
    return {"flops": 2 * b * m * n, "bytes": 4 * b * (m * n + n + m)}
