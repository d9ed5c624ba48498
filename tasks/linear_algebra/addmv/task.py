"""Matrix-vector product plus a scaled vector (addmv).

Implement `addmv(input, mat, vec, beta=1.0, alpha=1.0)`: for float32 `input` [M], `mat` [M, N]
and `vec` [N], return a new float32 tensor `out` [M] with

    out[i] = beta * input[i] + alpha * (sum over j of mat[i, j] * vec[j])

This is `torch.addmv(input, mat, vec, beta=beta, alpha=alpha)`, including its special case:
when `beta == 0`, `input` is ignored entirely, so NaN or Inf values in it do not propagate.

- M and N are arbitrary (either may be 1). Accumulate the products in float32.
- `mat` may be non-contiguous: row-major or column-major (the `.t()` view of a contiguous [N, M]
  tensor). Inputs must not be modified. `beta` and `alpha` are Python floats.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is
free). Entries of `mat` and `vec` are scaled by N**-0.25, so the products have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def addmv(input: torch.Tensor, mat: torch.Tensor, vec: torch.Tensor, beta: float = 1.0,
          alpha: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.addmv(input, mat, vec, beta=beta, alpha=alpha)


CASES = [
    {"name": "small", "small": True, "m": 12, "n": 1000, "beta": 1.0, "alpha": 1.0},
    {"name": "scaled_small", "small": True, "m": 100, "n": 37, "beta": 0.5, "alpha": -1.5},
    {"name": "beta0_inf_input_small", "small": True, "m": 64, "n": 64, "beta": 0.0, "alpha": 2.0,
     "inf_input": True},
    {"name": "one_row_small", "small": True, "m": 1, "n": 3000, "beta": -1.0, "alpha": 1.0},
    {"name": "column_major_outliers_small", "small": True, "m": 129, "n": 65, "beta": 2.0, "alpha": 0.5,
     "column_major": True, "outliers": True},
    {"name": "square_8192", "small": False, "m": 8192, "n": 8192, "beta": 1.0, "alpha": 1.0},
    {"name": "tall_65537x1024_outliers", "small": False, "m": 65537, "n": 1024, "beta": 0.5, "alpha": 2.0,
     "outliers": True},
    {"name": "column_major_8192x6000", "small": False, "m": 8192, "n": 6000, "beta": -1.0, "alpha": 0.75,
     "column_major": True},
    {"name": "beta0_wide_1024x65537", "small": False, "m": 1024, "n": 65537, "beta": 0.0, "alpha": 1.0,
     "inf_input": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal input; mat and vec standard normal scaled by N**-0.25 (outliers in mat:
    0.1% scaled by 10). `inf_input` puts +Inf and -Inf into 1% of `input`'s entries each (only
    with beta = 0). A column_major case returns `mat` as the `.t()` view of an [N, M] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n = case["m"], case["n"]
    inp = torch.randn(m, generator=g, device=g.device)
    if case.get("inf_input"):
        u = torch.rand(m, generator=g, device=g.device)
        inp = torch.where(u < 0.01, float("-inf"), torch.where(u > 0.99, float("inf"), inp))
    cm = case.get("column_major", False)
    s = n ** -0.25
    mat = normal(g, [n, m] if cm else [m, n], case.get("outliers", False)) * s
    vec = torch.randn(n, generator=g, device=g.device) * s
    inp, mat, vec = inp.to(device), mat.to(device), vec.to(device)
    if cm:
        mat = mat.t()
    return (inp, mat, vec), {"beta": case["beta"], "alpha": case["alpha"]}


def cost(case: dict) -> dict:
    m, n = case["m"], case["n"]
    reads_input = case.get("beta", 1.0) != 0  # beta == 0: `input` is never read
    return {"flops": 2 * m * n + 3 * m, "bytes": 4 * (m * n + n + (1 + reads_input) * m)}
