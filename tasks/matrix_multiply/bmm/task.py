"""Batched half-precision matrix multiplication.

Implement `bmm(a, b)`: for float16 `a` [B, M, K] and `b` [B, K, N], return a new float16 tensor
`c` [B, M, N] with

    c[p, i, j] = sum over k of a[p, i, k] * b[p, k, j]

- Accumulate the products in float32 and round each result once to float16.
- B, M, N, K are arbitrary (not multiples of any block size; B, M or N may be 1).
- `a` and `b` may be non-contiguous: in particular `b` may be the transpose of the last two
  dimensions of a contiguous [B, N, K] tensor (as in attention's Q @ K^T). Inputs must not be
  modified.

The result is compared with `torch.bmm(a, b)` using rtol = atol = 1e-2, which absorbs different
accumulation orders. Inputs are standard normal scaled by K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 3
TOLERANCE = {"float16": (1e-2, 1e-2)}


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (float16 inputs and output, float32 accumulation)."""
    return torch.bmm(a, b)


CASES = [
    {"name": "small", "small": True, "b": 2, "m": 32, "n": 32, "k": 32},
    {"name": "odd_small", "small": True, "b": 3, "m": 17, "n": 30, "k": 23},
    {"name": "batch1_m1_small", "small": True, "b": 1, "m": 1, "n": 40, "k": 64},
    {"name": "b_transposed_small", "small": True, "b": 2, "m": 24, "n": 20, "k": 40, "b_transposed": True},
    {"name": "outliers_small", "small": True, "b": 2, "m": 16, "n": 48, "k": 32, "outliers": True},
    {"name": "tiles_small", "small": True, "b": 2, "m": 136, "n": 140, "k": 100},
    {"name": "b32_1024x1024x1024", "small": False, "b": 32, "m": 1024, "n": 1024, "k": 1024},
    {"name": "attention_scores_256x512x512x128_bt", "small": False, "b": 256, "m": 512, "n": 512, "k": 128,
     "b_transposed": True},
    {"name": "odd_12x1000x777x1500_outliers", "small": False, "b": 12, "m": 1000, "n": 777, "k": 1500,
     "outliers": True},
    {"name": "b4_4096x4096x2048", "small": False, "b": 4, "m": 4096, "n": 4096, "k": 2048},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by K**-0.25 (outliers: 0.1% scaled by 10); with
    `b_transposed`, `b` is `.transpose(1, 2)` of a contiguous [B, N, K] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    s = k ** -0.25
    bt = case.get("b_transposed", False)
    a = normal(g, [bs, m, k], case.get("outliers", False)) * s
    b = normal(g, [bs, n, k] if bt else [bs, k, n], case.get("outliers", False)) * s
    a, b = a.half().to(device), b.half().to(device)
    if bt:
        b = b.transpose(1, 2)
    return (a, b), {}


def cost(case: dict) -> dict:
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    return {"flops": 2 * bs * m * n * k, "bytes": 2 * bs * (m * k + k * n + m * n)}
