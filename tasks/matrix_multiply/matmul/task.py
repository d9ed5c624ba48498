"""Half-precision matrix multiplication.

Implement `matmul(a, b)`: `c = a @ b` for float16 matrices `a` of shape [M, K] and `b` of shape
[K, N], returning a new float16 tensor `c` of shape [M, N] with

    c[i, j] = sum over k of a[i, k] * b[k, j]

- Accumulate the products in float32 and round each result once to float16.
- M, N and K are arbitrary (not necessarily multiples of any block size; M may be 1).
- `a` and `b` may be non-contiguous: in particular `b` may be the transpose of a contiguous [N, K]
  tensor (column-major), as with `x @ w.t()` in a linear layer. Inputs must not be modified.

The result is compared with `torch.matmul(a, b)` (PyTorch's float16 matmul, which accumulates in
float32) using rtol = atol = 1e-2, which absorbs the different accumulation orders over K.
Inputs are standard normal and scaled by K**-0.25 each, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 3
TOLERANCE = {"float16": (1e-2, 1e-2)}


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (float16 inputs and output, float32 accumulation)."""
    return torch.matmul(a, b)


CASES = [
    {"name": "square_small", "small": True, "m": 128, "n": 128, "k": 128},
    {"name": "odd_small", "small": True, "m": 100, "n": 130, "k": 77},
    {"name": "gemv_m1_small", "small": True, "m": 1, "n": 300, "k": 256},
    {"name": "b_transposed_small", "small": True, "m": 96, "n": 80, "k": 200, "b_transposed": True},
    {"name": "outliers_small", "small": True, "m": 64, "n": 192, "k": 160, "outliers": True},
    {"name": "square_4096", "small": False, "m": 4096, "n": 4096, "k": 4096},
    {"name": "odd_3000x5000x2000", "small": False, "m": 3000, "n": 5000, "k": 2000},
    {"name": "linear_8192x4096x4096_bt", "small": False, "m": 8192, "n": 4096, "k": 4096, "b_transposed": True},
    {"name": "outliers_2048x8192x1024", "small": False, "m": 2048, "n": 8192, "k": 1024, "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by K**-0.25 (outliers: 0.1% scaled by 10); with
    `b_transposed`, `b` is the `.t()` view of a contiguous [N, K] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    s = k ** -0.25
    a = normal(g, [m, k], case.get("outliers", False)) * s
    b_shape = [n, k] if case.get("b_transposed") else [k, n]
    b = normal(g, b_shape, case.get("outliers", False)) * s
    a, b = a.half().to(device), b.half().to(device)
    if case.get("b_transposed"):
        b = b.t()
    return (a, b), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
