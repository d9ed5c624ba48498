"""Batched lower-triangular solve (forward substitution).

Implement `solve_triangular(a, b)`: for a float32 batch of square matrices `a` [B, N, N] and
right-hand sides `b` [B, N, K], return a new float32 tensor `x` [B, N, K] solving

    L @ x = b   for every batch element, where L = the lower triangle of a (diagonal included)

i.e. for i = 0 .. N-1 (forward substitution, column by column of b):

    x[i, :] = (b[i, :] - sum over j < i of a[i, j] * x[j, :]) / a[i, i]

This is `torch.linalg.solve_triangular(a, b, upper=False)`.

- Entries of `a` above the diagonal hold arbitrary values and must be ignored (only the lower
  triangle is read). The diagonal is not unit: divide by a[i, i] (always in [1, 2]).
- N <= 128 (small systems, many of them); B and K are arbitrary (K may be 1). Compute in float32.
- `b` may be non-contiguous (for example the first K columns of a wider tensor). Inputs must not be
  modified.

The matrices are well conditioned (diagonal in [1, 2], strictly-lower entries of size
0.5 / sqrt(N)), so rounding stays near 1e-6; compared with the PyTorch call above with
rtol = atol = 1e-4.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "LinearAlgebra"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-4)}


def solve_triangular(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.linalg.solve_triangular(a, b, upper=False)


CASES = [
    {"name": "small", "small": True, "b": 1, "n": 8, "k": 8},
    {"name": "odd_small", "small": True, "b": 1, "n": 7, "k": 5},
    {"name": "k1_small", "small": True, "b": 1, "n": 6, "k": 1},
    {"name": "n1_small", "small": True, "b": 3, "n": 1, "k": 7},
    {"name": "sliced_outliers_small", "small": True, "b": 1, "n": 5, "k": 40, "sliced": True,
     "outliers": True},
    {"name": "b8192_n64_k32", "small": False, "b": 8192, "n": 64, "k": 32},
    {"name": "b2048_n128_k128_outliers", "small": False, "b": 2048, "n": 128, "k": 128, "outliers": True},
    {"name": "b65536_n16_k1", "small": False, "b": 65536, "n": 16, "k": 1},
    {"name": "b4096_n37_k100_sliced", "small": False, "b": 4096, "n": 37, "k": 100, "sliced": True},
]

# Unseen cases (kbx_ray/unseen.py): N <= 128 by contract.
SHAPES = family(most={"n": 128})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """a: diagonal uniform in [1, 2], strictly-lower entries normal * 0.5 / sqrt(N), entries above
    the diagonal standard normal (garbage to be ignored). b: standard normal (outliers: 0.1% scaled
    by 10). A sliced case returns the first K columns of a b that is 5 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    bsz, n, k = case["b"], case["n"], case["k"]
    low = torch.randn(bsz, n, n, generator=g, device=g.device) * (0.5 / n ** 0.5)
    up = torch.randn(bsz, n, n, generator=g, device=g.device)
    diag = 1 + torch.rand(bsz, n, generator=g, device=g.device)
    a = torch.tril(low, -1) + torch.triu(up, 1) + torch.diag_embed(diag)
    w = k + 5 if case.get("sliced") else k
    rhs = normal(g, [bsz, n, w], case.get("outliers"))
    a, rhs = a.to(device), rhs.to(device)
    if case.get("sliced"):
        rhs = rhs[..., :k]
    return (a, rhs), {}


def cost(case: dict) -> dict:
    bsz, n, k = case["b"], case["n"], case["k"]
    return {"flops": bsz * n * n * k, "bytes": 4 * bsz * (n * (n + 1) // 2 + 2 * n * k)}
