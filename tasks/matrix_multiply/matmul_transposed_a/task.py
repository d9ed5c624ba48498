"""Matrix multiplication with a transposed left operand (A^T @ B), half precision.

Implement `matmul_transposed_a(a, b)`: for float16 `a` [K, M] and `b` [K, N] (both contiguous,
row-major), return a new float16 tensor `c` [M, N] with

    c[i, j] = sum over k of a[k, i] * b[k, j]

i.e. `c = a.t() @ b`, the weight-gradient product of a linear layer (X^T @ dY with K tokens).
The left operand is read column-wise: a good kernel loads [BLOCK_K, BLOCK_M] tiles of `a` along
its contiguous dimension and transposes them in registers (or lets tl.dot take a transposed tile),
instead of copying `a` to a transposed layout.

- Accumulate the products in float32 and round each result once to float16.
- M, N, K are arbitrary (not multiples of any block size; M or N may be 1). Inputs must not be
  modified.

Compared with `torch.matmul(a.t(), b)` using rtol = atol = 1e-2. Inputs are standard normal scaled
by K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2)}


def matmul_transposed_a(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.matmul(a.t(), b)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32},
    {"name": "odd_small", "small": True, "m": 19, "n": 27, "k": 50},
    {"name": "m1_small", "small": True, "m": 1, "n": 40, "k": 64},
    {"name": "n1_small", "small": True, "m": 24, "n": 1, "k": 33},
    {"name": "outliers_small", "small": True, "m": 16, "n": 32, "k": 48, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100},
    {"name": "wgrad_4096x4096_k16384", "small": False, "m": 4096, "n": 4096, "k": 16384},
    {"name": "wgrad_1024x11008_k8192_outliers", "small": False, "m": 1024, "n": 11008, "k": 8192,
     "outliers": True},
    {"name": "odd_3000x2000_k5001", "small": False, "m": 3000, "n": 2000, "k": 5001},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by K**-0.25 (outliers: 0.1% scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    s = k ** -0.25
    mats = []
    for shape in ([k, m], [k, n]):
        x = normal(g, shape, case.get("outliers"))
        mats.append((x * s).half().to(device))
    return tuple(mats), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
