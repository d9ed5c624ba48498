"""Outer product of two vectors.

Implement `outer(x, y)`: for a vector `x` of shape [M] and a vector `y` of shape [N] with the same
dtype, return a new tensor `out` of shape [M, N] and that dtype with

    out[i, j] = x[i] * y[j]

- dtype is float32, float16 or bfloat16. For float16/bfloat16, multiply in float32 and round the
  product once to the output dtype (this equals PyTorch's result exactly).
- M and N are arbitrary (either may be 1). `x` and `y` may be strided views (for example every
  second element of a longer vector). Inputs must not be modified.

The result is compared with `torch.outer(x, y)` using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 1


def outer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.outer(x, y)


CASES = [
    {"name": "fp32_small", "small": True, "m": 100, "n": 37, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "m": 33, "n": 65, "dtype": "float16"},
    {"name": "bf16_small", "small": True, "m": 17, "n": 129, "dtype": "bfloat16"},
    {"name": "m1_small", "small": True, "m": 1, "n": 1000, "dtype": "float32"},
    {"name": "n1_small", "small": True, "m": 513, "n": 1, "dtype": "float32"},
    {"name": "strided_outliers_small", "small": True, "m": 70, "n": 50, "dtype": "float32", "strided": True,
     "outliers": True},
    {"name": "x_strided_small", "small": True, "m": 60, "n": 45, "dtype": "float32", "strided": "x"},
    {"name": "fp32_8192x8192", "small": False, "m": 8192, "n": 8192, "dtype": "float32"},
    {"name": "fp16_16384x12288_outliers", "small": False, "m": 16384, "n": 12288, "dtype": "float16",
     "outliers": True},
    {"name": "bf16_strided_5000x30001", "small": False, "m": 5000, "n": 30001, "dtype": "bfloat16",
     "strided": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal vectors (outliers: 0.1% scaled by 10). A strided case draws vectors twice as
    long and returns every second element (`strided: "x"`: only x)."""
    g = torch.Generator(device).manual_seed(seed)
    step = 2 if case.get("strided") else 1
    step_y = 2 if case.get("strided") is True else 1
    dtype = getattr(torch, case["dtype"])
    x = normal(g, [case["m"] * step], case.get("outliers", False)).to(dtype).to(device)[::step]
    y = normal(g, [case["n"] * step_y], case.get("outliers", False)).to(dtype).to(device)[::step_y]
    return (x, y), {}


def cost(case: dict) -> dict:
    m, n = case["m"], case["n"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": m * n, "bytes": (m + n + m * n) * size}
