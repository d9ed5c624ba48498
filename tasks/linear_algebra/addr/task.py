"""Rank-1 update of a matrix (addr).

Implement `addr(input, vec1, vec2, beta=1.0, alpha=1.0)`: for a float32 matrix `input` [M, N] and
float32 vectors `vec1` [M] and `vec2` [N], return a new float32 tensor `out` [M, N] with

    out[i, j] = beta * input[i, j] + alpha * (vec1[i] * vec2[j])

This is `torch.addr(input, vec1, vec2, beta=beta, alpha=alpha)`, including its special case:
when `beta == 0`, `input` is ignored entirely, so NaN or Inf values in it do not propagate
(out = alpha * vec1[i] * vec2[j]).

- M and N are arbitrary (either may be 1). `input` may be non-contiguous (for example the
  transpose of a contiguous [N, M] tensor); the vectors may be strided. Inputs must not be
  modified. `beta` and `alpha` are Python floats.

Compared with the PyTorch call above using the default float32 tolerance (rtol = atol = 1e-5);
any order of the three multiplications is accurate enough.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2


def addr(input: torch.Tensor, vec1: torch.Tensor, vec2: torch.Tensor, beta: float = 1.0,
         alpha: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.addr(input, vec1, vec2, beta=beta, alpha=alpha)


CASES = [
    {"name": "small", "small": True, "m": 64, "n": 100, "beta": 1.0, "alpha": 1.0},
    {"name": "scaled_small", "small": True, "m": 37, "n": 129, "beta": 0.5, "alpha": -2.0},
    {"name": "beta0_inf_input_small", "small": True, "m": 50, "n": 60, "beta": 0.0, "alpha": 1.5,
     "inf_input": True},
    {"name": "m1_small", "small": True, "m": 1, "n": 1000, "beta": 2.0, "alpha": 0.25},
    {"name": "transposed_strided_outliers_small", "small": True, "m": 70, "n": 45, "beta": -1.0, "alpha": 3.0,
     "transposed": True, "outliers": True},
    {"name": "square_8192", "small": False, "m": 8192, "n": 8192, "beta": 0.9, "alpha": 0.1},
    {"name": "odd_5000x10007_outliers", "small": False, "m": 5000, "n": 10007, "beta": 1.0, "alpha": -1.0,
     "outliers": True},
    {"name": "transposed_6000x7000", "small": False, "m": 6000, "n": 7000, "beta": 0.5, "alpha": 2.0,
     "transposed": True},
    {"name": "beta0_8192x4096", "small": False, "m": 8192, "n": 4096, "beta": 0.0, "alpha": 1.0,
     "inf_input": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal input and vectors (outliers: 0.1% scaled by 10). `inf_input` puts +Inf and
    -Inf into 1% of `input`'s entries each (only with beta = 0; 0 * Inf would be NaN). A transposed case returns `input`
    as the `.t()` view of a contiguous [N, M] tensor and the vectors as every second element."""
    g = torch.Generator(device).manual_seed(seed)
    m, n = case["m"], case["n"]
    out = case.get("outliers", False)
    t = case.get("transposed", False)
    inp = normal(g, [n, m] if t else [m, n], out)
    if case.get("inf_input"):
        u = torch.rand(inp.shape, generator=g, device=g.device)
        inp = torch.where(u < 0.01, float("-inf"), torch.where(u > 0.99, float("inf"), inp))
    step = 2 if t else 1
    v1 = normal(g, [m * step], out)
    v2 = normal(g, [n * step], out)
    inp, v1, v2 = inp.to(device), v1.to(device), v2.to(device)
    if t:
        inp, v1, v2 = inp.t(), v1[::2], v2[::2]
    return (inp, v1, v2), {"beta": case["beta"], "alpha": case["alpha"]}


def cost(case: dict) -> dict:
    m, n = case["m"], case["n"]
    reads_input = case.get("beta", 1.0) != 0  # beta == 0: `input` is never read
    return {"flops": 3 * m * n, "bytes": 4 * ((1 + reads_input) * m * n + m + n)}
