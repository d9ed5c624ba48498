"""Smooth L1 (Huber-style) loss with a threshold beta (mean reduction).

Implement `smooth_l1_loss(input, target, beta=1.0)`: for float32 tensors `input` and `target` of
the same shape, return a new 0-dim float32 tensor holding the mean over all elements of

    z = |input - target|
    l = 0.5 * z ** 2 / beta     if z < beta
        z - 0.5 * beta          otherwise

with the special case beta == 0, where l = z (plain L1; the quadratic branch is never taken).
This is `torch.nn.functional.smooth_l1_loss(input, target, beta=beta)` (reduction="mean").

- Contiguous tensors of 1 to 3 dimensions with arbitrary sizes (at least one element). `beta` is
  a Python float >= 0.
- Accumulate in float32. Two calls on the same inputs must return bit-identical results (no
  floating-point atomics in an arbitrary order). Do all the computation, the final division
  included, on the GPU. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def smooth_l1_loss(input: torch.Tensor, target: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.smooth_l1_loss(input, target, beta=beta)


CASES = [
    {"name": "beta1_small", "small": True, "shape": [37, 41], "beta": 1.0},
    {"name": "beta_half_1d_small", "small": True, "shape": [12345], "beta": 0.5},
    {"name": "beta0_l1_small", "small": True, "shape": [3, 17, 29], "beta": 0.0},
    {"name": "size1", "small": True, "shape": [1], "beta": 2.0},
    {"name": "large_beta_outliers_small", "small": True, "shape": [64, 65], "beta": 3.0, "outliers": True},
    {"name": "beta1_64M", "small": False, "shape": [8192, 8192], "beta": 1.0},
    {"name": "beta_0.1_odd_3d_outliers", "small": False, "shape": [7, 3001, 1999], "beta": 0.1, "outliers": True},
    {"name": "beta0_16M", "small": False, "shape": [16777216], "beta": 0.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input standard normal (outliers: 0.1% scaled by 10); target = input + 1.2 * normal, so the
    differences fall on both sides of beta."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    x = normal(g, shape, case.get("outliers"))
    target = x + 1.2 * torch.randn(shape, generator=g, device=g.device)
    return (x.to(device), target.to(device)), {"beta": case["beta"]}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 5 * n, "bytes": 8 * n + 4}
