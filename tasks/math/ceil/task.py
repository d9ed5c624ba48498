"""Elementwise ceiling.

Implement `ceil(x)`: return a new tensor with the same shape and dtype as `x`, where

    y = ceil(x)   (the smallest integer >= x, as a floating-point value)

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- Exact: integers (and values beyond 2**23 in float32, 2**10 in float16, 2**7 in bfloat16, which are
  all integers) are returned unchanged.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.ceil(x)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Math"
LEVEL = 1


def ceil(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.ceil(x)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16"},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t"},
    {"name": "strided_3d_small", "small": True, "shape": [3, 7, 50], "dtype": "float16", "view": "s"},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "view": "t"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with standard deviation 20 (outliers: 0.1% scaled by 10); 20% of them are snapped
    to exact integers or halves."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = 20 * z
    x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.2, torch.round(2 * x) / 2, x)  # exact integers and halves
    return (finish(x, case, device),), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": 2 * n * size}
