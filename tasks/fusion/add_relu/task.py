"""Fused add + ReLU.

Implement `add_relu(x, y)`: return `relu(x + y)` as a new tensor:

    out = max(x + y, 0)          # the sum computed in float32, rounded once to the input dtype

- `x` and `y` have the same shape and dtype (float32, float16 or bfloat16), on the GPU. No
  broadcasting. Either may be a non-contiguous 2-D view (for example a transposed matrix); the
  output is a new tensor of the same shape (it may be contiguous).
- Do it in one pass: read x and y once, write the output once. Inputs must not be modified and the
  output must not share memory with them.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 2


def add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: the sum in float32, one rounding to the input dtype."""
    return torch.relu(x.float() + y.float()).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 61], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [4000], "dtype": "bfloat16", "outliers": True},
    {"name": "size1", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "y_transposed_small", "small": True, "shape": [45, 70], "dtype": "float32", "transposed": True},
    {"name": "programs_small", "small": True, "shape": [70, 130], "dtype": "float32"},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_4x2048x4096_outliers", "small": False, "shape": [4, 2048, 4096], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_odd_20M", "small": False, "shape": [20000001], "dtype": "bfloat16"},
    {"name": "fp16_y_transposed", "small": False, "shape": [4100, 5120], "dtype": "float16",
     "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); y: 0.5 * normal. With `transposed`, y is
    the `.t()` view of a contiguous tensor of the transposed shape."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    x = normal(g, shape, case.get("outliers"))
    y_shape = shape[::-1] if case.get("transposed") else shape
    y = 0.5 * torch.randn(y_shape, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, y = x.to(dtype).to(device), y.to(dtype).to(device)
    if case.get("transposed"):
        y = y.t()
    return (x, y), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 2 * n, "bytes": 3 * n * size}
