"""Elementwise Python-style remainder by a scalar (sign of the divisor).

Implement `remainder(x, other)`: return a new tensor with the same shape and dtype as `x`, where

    y = x - floor(x / other) * other      (the exact remainder, as Python's %)

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `other` is a nonzero Python float that float16 and bfloat16 represent exactly (e.g. 2.5, -1.5,
  0.375), so it means the same value in every dtype.
- The result has the sign of `other` (or is zero). Like PyTorch, compute the exact C-style remainder
  r = fmod(x, other) (sign of x; exact, unlike a float32 evaluation of x - trunc(x / other) *
  other) and add `other` once when r != 0 and the signs of r and other differ; that addition is
  the only rounding.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.remainder(x, other)`: shape and dtype must match exactly, NaN
and infinities must sit in the same places, and finite values must agree within the default
tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Math"
LEVEL = 2


def remainder(x: torch.Tensor, other: float) -> torch.Tensor:
    """PyTorch reference."""
    return torch.remainder(x, other)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32", "other": 2.5},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16", "other": -1.5},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16", "other": 0.75},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32", "other": 3.0},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t",
     "other": 0.375},
    {"name": "strided_3d_small", "small": True, "shape": [3, 7, 50], "dtype": "float16", "view": "s",
     "other": -2.0},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True,
     "other": 1.0},
    {"name": "integers_small", "small": True, "shape": [2001], "dtype": "float32", "integers": True,
     "other": 3.0},
    {"name": "small_x_small", "small": True, "shape": [500], "dtype": "float32", "other": 1000.0, "scale": 1e-4},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32", "other": 2.5},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True,
     "other": -1.5},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16", "other": 0.75},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "view": "t",
     "other": 3.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with standard deviation 8 (outliers: 0.1% scaled by 10); an integers case rounds
    them to integers; `scale` multiplies them (x much smaller than `other`)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = 8 * z * case.get("scale", 1.0)
    if case.get("integers"):  # integer-valued x: many exact-zero remainders
        x = torch.round(x)
    return (finish(x, case, device),), {k: case[k] for k in ('other',) if k in case}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 5 * n, "bytes": 2 * n * size}
