"""Half-precision matrix multiplication with odd, unaligned sizes.

Implement `matmul_odd_sizes(a, b)`: `c = a @ b` for contiguous float16 matrices `a` [M, K] and
`b` [K, N], returning a new float16 tensor `c` [M, N] with

    c[i, j] = sum over k of a[i, k] * b[k, j]

- Every size is odd here (M, N, K such as 1000 x 1001 x 999), so row strides are not multiples of
  8 elements: rows are not 16-byte aligned, tiles are ragged on every edge, and kernels that
  assume aligned vector loads or tensor-memory descriptors with aligned strides go wrong. Sizes
  of 1 occur too (K = 1 is an outer product).
- Accumulate the products in float32 and round each result once to float16. Inputs must not be
  modified.

Compared with `torch.matmul(a, b)` using rtol = atol = 1e-2. Inputs are standard normal scaled by
K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 3
TOLERANCE = {"float16": (1e-2, 1e-2)}


def matmul_odd_sizes(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.matmul(a, b)


CASES = [
    {"name": "odd_small", "small": True, "m": 31, "n": 33, "k": 29},
    {"name": "k1_small", "small": True, "m": 17, "n": 31, "k": 1},
    {"name": "m1_small", "small": True, "m": 1, "n": 45, "k": 63},
    {"name": "n1_small", "small": True, "m": 23, "n": 1, "k": 37},
    {"name": "outliers_small", "small": True, "m": 15, "n": 27, "k": 41, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 137, "n": 139, "k": 99},
    {"name": "odd_1000x1001x999", "small": False, "m": 1000, "n": 1001, "k": 999},
    {"name": "odd_4095x4097x4093", "small": False, "m": 4095, "n": 4097, "k": 4093},
    {"name": "odd_8191x3x8191_outliers", "small": False, "m": 8191, "n": 3, "k": 8191, "outliers": True},
    {"name": "odd_2047x6143x3071", "small": False, "m": 2047, "n": 6143, "k": 3071},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by K**-0.25 (outliers: 0.1% scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    s = k ** -0.25
    mats = []
    for shape in ([m, k], [k, n]):
        x = normal(g, shape, case.get("outliers"))
        mats.append((x * s).half().to(device))
    return tuple(mats), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
