"""Matrix multiplication plus a scaled bias (addmm), half precision.

Implement `addmm(input, mat1, mat2, beta=1.0, alpha=1.0)`: for float16 `mat1` [M, K] and `mat2`
[K, N] and a float16 `input` of shape [N] (a bias row broadcast over the M rows) or [M, N],
return a new float16 tensor `out` [M, N] with

    out[i, j] = float16( beta * input[i, j] + alpha * (sum over k of mat1[i, k] * mat2[k, j]) )

where input[i, j] means input[j] for a 1-D input. This is `torch.addmm(input, mat1, mat2,
beta=beta, alpha=alpha)`, including its special case: when `beta == 0`, `input` is ignored
entirely, so NaN or Inf values in it do not propagate.

- Accumulate the products in float32, apply alpha, beta and input in float32, and round once to
  float16.
- M, N, K are arbitrary (not multiples of any block size; M may be 1). `mat2` may be the transpose
  of a contiguous [N, K] tensor (column-major). `beta` and `alpha` are Python floats. Inputs must
  not be modified.

Compared with the PyTorch call above using rtol = atol = 1e-2. mat1 and mat2 are standard normal
scaled by K**-0.25, so the products have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 3
TOLERANCE = {"float16": (1e-2, 1e-2)}


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, beta: float = 1.0,
          alpha: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


CASES = [
    {"name": "bias_row_small", "small": True, "m": 32, "n": 32, "k": 32, "bias": "row", "beta": 1.0,
     "alpha": 1.0},
    {"name": "full_input_scaled_small", "small": True, "m": 30, "n": 17, "k": 45, "bias": "full", "beta": 0.5,
     "alpha": -2.0},
    {"name": "m1_small", "small": True, "m": 1, "n": 64, "k": 48, "bias": "row", "beta": 2.0, "alpha": 0.5},
    {"name": "beta0_inf_input_small", "small": True, "m": 20, "n": 24, "k": 16, "bias": "full", "beta": 0.0,
     "alpha": 1.0, "inf_input": True},
    {"name": "bt_outliers_small", "small": True, "m": 24, "n": 40, "k": 32, "bias": "row", "beta": 1.0,
     "alpha": 1.0, "b_transposed": True, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "bias": "full", "beta": 1.0, "alpha": 1.0},
    {"name": "linear_8192x4096x4096_bt", "small": False, "m": 8192, "n": 4096, "k": 4096, "bias": "row",
     "beta": 1.0, "alpha": 1.0, "b_transposed": True},
    {"name": "full_4096x4096x4096_scaled", "small": False, "m": 4096, "n": 4096, "k": 4096, "bias": "full",
     "beta": 0.5, "alpha": 0.75},
    {"name": "odd_3000x5000x2000_outliers", "small": False, "m": 3000, "n": 5000, "k": 2000, "bias": "row",
     "beta": -1.0, "alpha": 1.0, "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input standard normal ([N] for bias "row", [M, N] for "full"; `inf_input` sets 2% of it to
    +-Inf, only with beta = 0); mat1, mat2 standard normal scaled by K**-0.25 (outliers: 0.1%
    scaled by 10). With `b_transposed`, mat2 is the `.t()` view of a contiguous [N, K] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    inp = torch.randn([n] if case["bias"] == "row" else [m, n], generator=g, device=g.device)
    if case.get("inf_input"):
        u = torch.rand(inp.shape, generator=g, device=g.device)
        inp = torch.where(u < 0.01, float("-inf"), torch.where(u > 0.99, float("inf"), inp))
    s = k ** -0.25
    bt = case.get("b_transposed", False)
    a = normal(g, [m, k], case.get("outliers", False)) * s
    b = normal(g, [n, k] if bt else [k, n], case.get("outliers", False)) * s
    inp, a, b = inp.half().to(device), a.half().to(device), b.half().to(device)
    if bt:
        b = b.t()
    return (inp, a, b), {"beta": case["beta"], "alpha": case["alpha"]}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    nin = 0 if case.get("beta", 1.0) == 0 else n if case["bias"] == "row" else m * n  # beta 0: not read
    return {"flops": 2 * m * n * k + 3 * m * n, "bytes": 2 * (m * k + k * n + m * n + nin)}
