"""Softplus activation with beta and threshold.

Implement `softplus(x, beta=1.0, threshold=20.0)`: return a new tensor with the same shape and dtype as `x`, where

    y = x                          if beta * x > threshold
    y = ln(1 + e ** (beta * x)) / beta   otherwise

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `beta` (default 1.0, > 0) and `threshold` (default 20.0) are Python floats; the linear branch is
  taken exactly when beta * x > threshold, as in PyTorch.
- Must not overflow for large beta * x below the threshold, and must stay accurate (no NaN, no
  spurious zeros beyond tolerance) for very negative x.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.nn.functional.softplus(x, beta, threshold)`: shape and dtype
must match exactly, NaN and infinities must sit in the same places, and finite values must agree
within the default tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16
1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Activation"
LEVEL = 2


def softplus(x: torch.Tensor, beta: float = 1.0, threshold: float = 20.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.softplus(x, beta, threshold)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32", "beta": 1.0,
     "threshold": 20.0},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16", "beta": 2.0,
     "threshold": 20.0},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16", "beta": 0.5, "threshold": 10.0},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32", "beta": 1.0, "threshold": 20.0},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t", "beta": 1.0,
     "threshold": 5.0},
    {"name": "strided_3d_small", "small": True, "shape": [3, 7, 50], "dtype": "float16", "view": "s",
     "beta": 3.0, "threshold": 20.0},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True,
     "beta": 1.0, "threshold": 20.0},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32", "beta": 1.0,
     "threshold": 20.0},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True,
     "beta": 2.0, "threshold": 10.0},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16", "beta": 0.5,
     "threshold": 20.0},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "view": "t",
     "beta": 1.0, "threshold": 5.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with standard deviation 4 (outliers: 0.1% scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = 4 * z
    return (finish(x, case, device),), {k: case[k] for k in ('beta', 'threshold') if k in case}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 6 * n, "bytes": 2 * n * size}
