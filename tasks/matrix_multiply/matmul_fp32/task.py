"""Single-precision matrix multiplication at full float32 accuracy.

Implement `matmul_fp32(a, b)`: `c = a @ b` for float32 matrices `a` [M, K] and `b` [K, N],
returning a new float32 tensor `c` [M, N] with

    c[i, j] = sum over k of a[i, k] * b[k, j]

- Precision policy: the result must be as accurate as a float32 computation. Plain TF32
  tensor-core products (10-bit mantissas, the default of `tl.dot` on float32 inputs) are NOT
  accurate enough: they err by about 1e-3 here. Use `tl.dot(..., input_precision="ieee")` or the
  split "tf32x3" mode (three TF32 products, about float32 accuracy), or an equivalent.
- M, N, K are arbitrary (not multiples of any block size; M may be 1). `a` and `b` may be
  non-contiguous: in particular `b` may be the transpose of a contiguous [N, K] tensor.
  Inputs must not be modified.

The result is compared with `torch.matmul(a, b)` (PyTorch's default float32 matmul, which does not
use TF32) with rtol = atol = 1e-4. Inputs are standard normal scaled by K**-0.25, so outputs have
unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-4)}


def matmul_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (full float32)."""
    return torch.matmul(a, b)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32},
    {"name": "odd_small", "small": True, "m": 27, "n": 19, "k": 45},
    {"name": "gemv_m1_small", "small": True, "m": 1, "n": 48, "k": 64},
    {"name": "b_transposed_small", "small": True, "m": 20, "n": 30, "k": 40, "b_transposed": True},
    {"name": "outliers_small", "small": True, "m": 32, "n": 16, "k": 64, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100},
    {"name": "square_4096", "small": False, "m": 4096, "n": 4096, "k": 4096},
    {"name": "odd_3000x2000x5000_bt", "small": False, "m": 3000, "n": 2000, "k": 5000, "b_transposed": True},
    {"name": "outliers_2048x8192x1024", "small": False, "m": 2048, "n": 8192, "k": 1024, "outliers": True},
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
    a, b = a.to(device), b.to(device)
    if bt:
        b = b.t()
    return (a, b), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 4 * (m * k + k * n + m * n)}
