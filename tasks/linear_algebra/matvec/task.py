"""Matrix-vector product.

Implement `matvec(a, x)`: `y = a @ x` for a float32 matrix `a` of shape [M, N] and a float32
vector `x` of shape [N], returning a new float32 vector `y` of shape [M] with

    y[i] = sum over j of a[i, j] * x[j]

- M and N are arbitrary (M or N may be 1). Accumulate in float32.
- `a` may be non-contiguous: row-major, or column-major (the `.t()` view of a contiguous [N, M]
  tensor). Inputs must not be modified.

The result is compared with `torch.mv(a, x)`; because the order of the additions is free, the
tolerance is rtol = atol = 1e-4. Inputs are scaled so that outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-4)}


def matvec(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.mv(a, x)


CASES = [
    {"name": "small", "small": True, "m": 12, "n": 1000},
    {"name": "one_row_small", "small": True, "m": 1, "n": 5000},
    {"name": "one_col_small", "small": True, "m": 13, "n": 1},
    {"name": "column_major_small", "small": True, "m": 129, "n": 200, "column_major": True},
    {"name": "outliers_small", "small": True, "m": 8, "n": 3001, "outliers": True},
    {"name": "square_8192", "small": False, "m": 8192, "n": 8192},
    {"name": "tall_65537x1024", "small": False, "m": 65537, "n": 1024},
    {"name": "wide_1024x65537_outliers", "small": False, "m": 1024, "n": 65537, "outliers": True},
    {"name": "column_major_8192x6000", "small": False, "m": 8192, "n": 6000, "column_major": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal `a` (outliers: 0.1% scaled by 10) and `x` / sqrt(N), so outputs have unit
    scale; with `column_major`, `a` is the `.t()` view of a contiguous [N, M] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n = case["m"], case["n"]
    shape = [n, m] if case.get("column_major") else [m, n]
    a = normal(g, shape, case.get("outliers"))
    x = torch.randn(n, generator=g, device=g.device) / n ** 0.5
    a, x = a.to(device), x.to(device)
    if case.get("column_major"):
        a = a.t()
    return (a, x), {}


def cost(case: dict) -> dict:
    m, n = case["m"], case["n"]
    return {"flops": 2 * m * n, "bytes": 4 * (m * n + n + m)}
