"""Elementwise reciprocal square root.

Implement `rsqrt(x)`: return a new tensor with the same shape and dtype as `x`, where

    y = 1 / sqrt(x)

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- rsqrt(+0) = +inf, rsqrt(-0) = -inf (IEEE; the nonpositive cases hold both zeros), rsqrt(+inf) =
  0, and a negative input gives NaN.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.rsqrt(x)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, edges, finish

CATEGORY = "Math"
LEVEL = 1


def rsqrt(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.rsqrt(x)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16"},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t"},
    {"name": "strided_3d_small", "small": True, "shape": [3, 7, 50], "dtype": "float16", "view": "s"},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True},
    {"name": "nonpositive_small", "small": True, "shape": [2001], "dtype": "float32", "nonpositive": True},
    {"name": "fp16_nonpositive_small", "small": True, "shape": [40, 50], "dtype": "float16",
     "nonpositive": True},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "view": "t"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Log-normal values exp(1.5 z) (outliers: 0.1% of the z scaled by 10); a nonpositive case also
    sets 5% to zero and negates 5%."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = torch.exp(1.5 * z)
    if case.get("nonpositive"):  # 5% exact zeros and 5% negated values
        u = torch.rand(z.shape, generator=g, device=g.device)
        x = torch.where(u < 0.05, 0.0, torch.where(u < 0.1, -x, x))
    x = finish(x, case, device)
    return (edges(x, (0.0, -0.0)) if case.get("nonpositive") else x,), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": 2 * n * size}
