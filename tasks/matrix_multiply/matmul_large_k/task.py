"""Half-precision matrix multiplication with a small output and a very long reduction (split-K).

Implement `matmul_large_k(a, b)`: `c = a @ b` for float16 `a` [M, K] and `b` [K, N], returning a
new float16 tensor `c` [M, N] with

    c[i, j] = sum over k of a[i, k] * b[k, j]

- Here M and N are small (tens to a few thousand) and K is huge (tens of thousands to a million):
  one program per output tile leaves most of the GPU idle, so a good kernel also splits the K
  dimension over several programs (split-K) and then combines the partial sums.
- Accumulate in float32 (partial sums included) and round each final result once to float16.
- Two calls on the same inputs must return bit-identical results, so partial sums may not be
  combined with floating-point atomics in an arbitrary order: write them to a float32 workspace
  and reduce it in a fixed order (for example with a second kernel).
- M, N, K are arbitrary (not multiples of any block size; M may be 1). `b` may be the transpose of
  a contiguous [N, K] tensor. Inputs must not be modified.

Compared with `torch.matmul(a, b)` using rtol = atol = 1e-2. Inputs are standard normal scaled by
K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2)}


def matmul_large_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.matmul(a, b)


CASES = [
    {"name": "small", "small": True, "m": 16, "n": 32, "k": 1024},
    {"name": "odd_small", "small": True, "m": 7, "n": 19, "k": 777},
    {"name": "m1_small", "small": True, "m": 1, "n": 16, "k": 1024},
    {"name": "bt_outliers_small", "small": True, "m": 20, "n": 24, "k": 600, "b_transposed": True,
     "outliers": True},
    {"name": "wide_n_small", "small": True, "m": 7, "n": 137, "k": 777},
    {"name": "64x64_k1048576", "small": False, "m": 64, "n": 64, "k": 1048576},
    {"name": "16x4096_k65536", "small": False, "m": 16, "n": 4096, "k": 65536},
    {"name": "odd_100x250_k262143_bt_outliers", "small": False, "m": 100, "n": 250, "k": 262143,
     "b_transposed": True, "outliers": True},
    {"name": "1024x1024_k131072", "small": False, "m": 1024, "n": 1024, "k": 131072},
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
    a, b = a.half().to(device), b.half().to(device)
    if bt:
        b = b.t()
    return (a, b), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
