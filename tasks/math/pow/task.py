"""Elementwise power with a scalar exponent.

Implement `pow(x, exponent)`: return a new tensor with the same shape and dtype as `x`, where

    y = x ** exponent

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `exponent` is a Python float: integral, fractional or negative. `x` may hold negative values,
  values near zero and, in float16, results that overflow to +-inf.
- Special values follow PyTorch (C pow): a negative base with an integral exponent gives a real
  result, negative only for odd exponents; a negative base with a non-integral exponent gives NaN;
  0 ** e is +inf for e < 0 and 0 for e > 0, and -0 ** e is -inf for a negative odd integer e (C
  pow; every case of both signs holds both zeros); x ** 0 = 1 for every x.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.pow(x, exponent)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, edges, finish

CATEGORY = "Math"
LEVEL = 2


def pow(x: torch.Tensor, exponent: float) -> torch.Tensor:
    """PyTorch reference."""
    return torch.pow(x, exponent)


CASES = [
    {"name": "fp32_cube_small", "small": True, "shape": [37, 101], "dtype": "float32", "exponent": 3.0},
    {"name": "fp16_square_small", "small": True, "shape": [3, 1001], "dtype": "float16", "exponent": 2.0},
    {"name": "bf16_sqrt_small", "small": True, "shape": [4097], "dtype": "bfloat16", "exponent": 0.5,
     "positive": True},
    {"name": "neg_fractional_small", "small": True, "shape": [2001], "dtype": "float32", "exponent": -1.5,
     "positive": True},
    {"name": "fractional_on_negatives_small", "small": True, "shape": [2001], "dtype": "float32",
     "exponent": 1.5},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32", "exponent": 2.5, "positive": True},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t",
     "exponent": -2.0},
    {"name": "fp16_strided_3d_overflow_small", "small": True, "shape": [3, 7, 50], "dtype": "float16",
     "view": "s", "exponent": 3.0, "outliers": True},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True,
     "exponent": 4.0},
    {"name": "fp32_16M_p2.5", "small": False, "shape": [4096, 4096], "dtype": "float32", "exponent": 2.5,
     "positive": True},
    {"name": "fp16_16M_cube_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16",
     "exponent": 3.0, "outliers": True},
    {"name": "bf16_16M_inv_sqrt", "small": False, "shape": [16777216], "dtype": "bfloat16", "exponent": -0.5,
     "positive": True},
    {"name": "fp32_transposed_16M_square", "small": False, "shape": [4000, 4200], "dtype": "float32",
     "view": "t", "exponent": 2.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Log-normal values exp(z) for the positive cases, otherwise normal values with standard deviation
    3 (outliers: 0.1% of the z scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = torch.exp(z) if case.get("positive") else 3 * z
    x = finish(x, case, device)  # signed zeros: a float16 cast of a tiny negative value is -0 too
    kwargs = {k: case[k] for k in ('exponent',) if k in case}
    return (x if case.get("positive") else edges(x, (0.0, -0.0)),), kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * n, "bytes": 2 * n * size}
