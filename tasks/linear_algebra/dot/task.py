"""Dot product of two long vectors.

Implement `dot(x, y)`: for float32 vectors `x` and `y` of shape [N], return a new 0-dim float32
tensor holding

    sum over i of x[i] * y[i]

- N is arbitrary, from 1 up to tens of millions: a good kernel splits the sum over many programs
  and combines the partial sums. Accumulate in float32.
- Two calls on the same inputs must return bit-identical results, so partial sums may not be
  combined with floating-point atomics in an arbitrary order; combine them in a fixed order (for
  example a second small kernel).
- `x` and `y` may be strided views (for example every third element of a longer vector). Inputs
  must not be modified.

The result is compared with `torch.dot(x, y)` with rtol = 1e-4 and atol = 1e-3 (the order of the
additions is free). Inputs are scaled by N**-0.25, so the result has unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-3)}


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.dot(x, y)


CASES = [
    {"name": "small", "small": True, "n": 3000},
    {"name": "odd_small", "small": True, "n": 12345},
    {"name": "size1", "small": True, "n": 1},
    {"name": "strided_small", "small": True, "n": 2500, "stride": 3},
    {"name": "outliers_small", "small": True, "n": 8191, "outliers": True},
    {"name": "x_strided_small", "small": True, "n": 2000, "stride": 3, "stride_y": 1},
    {"name": "n_64M", "small": False, "n": 67108864},
    {"name": "n_odd_outliers", "small": False, "n": 50000017, "outliers": True},
    {"name": "strided_16M", "small": False, "n": 16777216, "stride": 2},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by N**-0.25 (outliers: 0.1% scaled by 10). With `stride` s,
    the vectors are every s-th element of vectors s times as long (`stride_y`, if given, for y)."""
    g = torch.Generator(device).manual_seed(seed)
    n, s = case["n"], case.get("stride", 1)
    vecs = []
    for s in (s, case.get("stride_y", s)):
        v = normal(g, [n * s], case.get("outliers"))
        vecs.append((v * n ** -0.25).to(device)[::s])
    if n == 1:  # a single product: keep it away from zero
        vecs[0] = vecs[0] + 2.0
    return tuple(vecs), {}


def cost(case: dict) -> dict:
    n = case["n"]
    return {"flops": 2 * n, "bytes": 8 * n + 4}
