"""Elementwise exponential.

Implement `exp(x)`: return a new tensor `y` with the same shape and dtype as `x`, where
`y = e ** x` elementwise.

- `x` is a floating-point tensor of any shape (float32, float16 or bfloat16), on the GPU.
- For float16/bfloat16 inputs, compute in float32 and round the result to the input dtype
  (values that overflow become +inf, as in PyTorch).
- `x` may be non-contiguous (for example a transposed 2-D view); the output may be contiguous.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.exp(x)`: shape and dtype must match exactly, values use the
default tolerance for the dtype (relative error matters most: outputs span many orders of
magnitude), and infinities must sit in the same places.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Math"
LEVEL = 1


def exp(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.exp(x)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [1000, 37], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16"},
    {"name": "size1", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [129, 300], "dtype": "float32", "transposed": True},
    {"name": "outliers_small", "small": True, "shape": [50000], "dtype": "float32", "outliers": True},
    {"name": "fp16_outliers_small", "small": True, "shape": [20011], "dtype": "float16", "outliers": True},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% of them scaled by 10, so float16 overflows to inf
    in places); a transposed case draws the transposed shape and returns its `.t()` view."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"][::-1] if case.get("transposed") else case["shape"]
    x = normal(g, shape, case.get("outliers"))
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("transposed"):
        x = x.t()
    return (x,), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n, "bytes": 2 * n * size}
