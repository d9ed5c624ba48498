"""Batched trace: the sum of the main diagonal of every matrix.

Implement `trace(x)`: for `x` of shape [B, M, N] (a batch of B matrices, M and N arbitrary and not
necessarily equal), return a new tensor `out` of shape [B] and the dtype of `x` with

    out[b] = sum over i < min(M, N) of x[b, i, i]

- dtype is float32. Accumulate in float32. The matrices may be non-contiguous (for example the
  transpose of the last two dimensions, or a slice of a larger batch).
- Only the diagonal needs to be read: a good kernel touches min(M, N) elements per matrix.
- Inputs must not be modified.

The result is compared with `torch.diagonal(x, dim1=-2, dim2=-1).sum(-1)` with rtol = atol = 1e-4
(the order of the additions is free).
"""
import torch

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-4)}


def trace(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.diagonal(x, dim1=-2, dim2=-1).sum(-1)


CASES = [
    {"name": "small", "small": True, "shape": [16, 40, 40]},
    {"name": "rect_small", "small": True, "shape": [5, 7, 300]},
    {"name": "single_small", "small": True, "shape": [1, 1000, 999]},
    {"name": "one_by_one_small", "small": True, "shape": [300, 1, 1]},
    {"name": "transposed_outliers_small", "small": True, "shape": [12, 50, 33], "transposed": True,
     "outliers": True},
    {"name": "programs_small", "small": True, "shape": [70, 20, 24]},
    {"name": "batch_65536x32x32", "small": False, "shape": [65536, 32, 32]},
    {"name": "batch_16384x64x48_outliers", "small": False, "shape": [16384, 64, 48], "outliers": True},
    {"name": "transposed_4096x100x129", "small": False, "shape": [4096, 100, 129], "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal entries with mean 0.05 (outliers: 0.1% scaled by 10), so traces are not centred on
    zero. A transposed case draws [B, N, M] and returns `.transpose(1, 2)`."""
    g = torch.Generator(device).manual_seed(seed)
    b, m, n = case["shape"]
    shape = [b, n, m] if case.get("transposed") else [b, m, n]
    x = torch.randn(shape, generator=g, device=g.device) + 0.05
    if case.get("outliers"):
        x = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, x * 10, x)
    x = x.to(device)
    if case.get("transposed"):
        x = x.transpose(1, 2)
    return (x,), {}


def cost(case: dict) -> dict:
    b, m, n = case["shape"]
    d = min(m, n)
    return {"flops": b * d, "bytes": 4 * (b * d + b)}
