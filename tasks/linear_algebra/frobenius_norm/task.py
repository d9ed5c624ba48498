"""Batched Frobenius norm of matrices.

Implement `frobenius_norm(x)`: for a float32 batch of matrices `x` [B, M, N], return a new float32
tensor `out` [B] with

    out[b] = sqrt(sum over i, j of x[b, i, j] ** 2)

This is `torch.linalg.matrix_norm(x, ord="fro")`.

- B, M, N are arbitrary (any may be 1). Accumulate in float32. When B is small and the matrices
  are large, a good kernel splits each matrix over several programs. Two calls on the same inputs
  must return bit-identical results (no floating-point atomics in an arbitrary order).
- `x` may be non-contiguous (for example the transpose of the last two dimensions). No special
  overflow handling is needed. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def frobenius_norm(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.linalg.matrix_norm(x, ord="fro")


CASES = [
    {"name": "small", "small": True, "shape": [4, 30, 50]},
    {"name": "one_matrix_small", "small": True, "shape": [1, 100, 90]},
    {"name": "many_tiny_small", "small": True, "shape": [300, 3, 2]},
    {"name": "one_by_one_small", "small": True, "shape": [20, 1, 1]},
    {"name": "transposed_outliers_small", "small": True, "shape": [3, 40, 33], "transposed": True,
     "outliers": True},
    {"name": "batch_64x1024x1024", "small": False, "shape": [64, 1024, 1024]},
    {"name": "one_matrix_8192x8191", "small": False, "shape": [1, 8192, 8191]},
    {"name": "many_65536x17x31_outliers", "small": False, "shape": [65536, 17, 31], "outliers": True},
    {"name": "transposed_16x2000x1500", "small": False, "shape": [16, 2000, 1500], "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal entries with a per-matrix scale in [0.2, 2] (outliers: 0.1% scaled by 10). A
    transposed case draws [B, N, M] and returns `.transpose(1, 2)`."""
    g = torch.Generator(device).manual_seed(seed)
    b, m, n = case["shape"]
    shape = [b, n, m] if case.get("transposed") else [b, m, n]
    x = normal(g, shape, case.get("outliers"))
    x = x * (0.2 + 1.8 * torch.rand(b, 1, 1, generator=g, device=g.device))
    x = x.to(device)
    if case.get("transposed"):
        x = x.transpose(1, 2)
    return (x,), {}


def cost(case: dict) -> dict:
    b, m, n = case["shape"]
    return {"flops": 2 * b * m * n, "bytes": 4 * (b * m * n + b)}
