"""bfloat16 matrix multiplication.

Implement `matmul_bf16(a, b)`: `c = a @ b` for bfloat16 matrices `a` [M, K] and `b` [K, N],
returning a new bfloat16 tensor `c` [M, N] with

    c[i, j] = sum over k of a[i, k] * b[k, j]

- Accumulate the products in float32 and round each result once to bfloat16.
- M, N, K are arbitrary (not multiples of any block size; M may be 1). `a` and `b` may be
  non-contiguous: in particular `b` may be the transpose of a contiguous [N, K] tensor.
  Inputs must not be modified.

The result is compared with `torch.matmul(a, b)` (bfloat16 inputs and output, float32
accumulation) using the default bfloat16 tolerance, rtol = atol = 1e-2 (a one-ulp difference in the
final rounding passes). Inputs are standard normal scaled by K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4


def matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.matmul(a, b)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32},
    {"name": "odd_small", "small": True, "m": 25, "n": 31, "k": 47},
    {"name": "gemv_m1_small", "small": True, "m": 1, "n": 64, "k": 40},
    {"name": "b_transposed_small", "small": True, "m": 16, "n": 24, "k": 64, "b_transposed": True},
    {"name": "outliers_small", "small": True, "m": 32, "n": 20, "k": 48, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100},
    {"name": "square_4096", "small": False, "m": 4096, "n": 4096, "k": 4096},
    {"name": "linear_8192x4096x4096_bt", "small": False, "m": 8192, "n": 4096, "k": 4096, "b_transposed": True},
    {"name": "odd_3001x4999x2001_outliers", "small": False, "m": 3001, "n": 4999, "k": 2001, "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by K**-0.25 (outliers: 0.1% scaled by 10); with
    `b_transposed`, `b` is the `.t()` view of a contiguous [N, K] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    s = k ** -0.25
    bt = case.get("b_transposed", False)
    a = normal(g, [m, k], case.get("outliers", False)) * s
    b = normal(g, [n, k] if bt else [k, n], case.get("outliers", False)) * s
    a, b = a.bfloat16().to(device), b.bfloat16().to(device)
    if bt:
        b = b.t()
    return (a, b), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
