"""Fused add + GELU.

Implement `add_gelu(x, y)`: return `gelu(x + y)` as a new tensor, where gelu is the exact
(erf-based) GELU, the default of `torch.nn.functional.gelu`:

    s = x + y                                   # rounded to the input dtype, as in PyTorch
    out = 0.5 * s * (1 + erf(s / sqrt(2)))      # computed in float32, rounded to the input dtype

- `x` and `y` have the same shape and dtype (float32, float16 or bfloat16), on the GPU. No
  broadcasting. Either may be non-contiguous (for example a transposed 2-D view); the output may
  be contiguous.
- Do it in one pass: the point of the fusion is to read x and y once and write the output once.
- Inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.nn.functional.gelu(x + y)` using the default tolerance for the
dtype. The tanh approximation of GELU is not accurate enough for float32.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 2


def add_gelu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (exact GELU)."""
    return torch.nn.functional.gelu(x + y)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [300, 37], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16"},
    {"name": "size1", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "x_transposed_small", "small": True, "shape": [129, 100], "dtype": "float32", "transposed": True},
    {"name": "outliers_small", "small": True, "shape": [20000], "dtype": "float32", "outliers": True},
    {"name": "x_transposed_3d_small", "small": True, "shape": [3, 40, 50], "dtype": "float16", "transposed": True},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_8x2048x1024_outliers", "small": False, "shape": [8, 2048, 1024], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16"},
    {"name": "fp32_x_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32",
     "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); y: 0.5 * normal. With `transposed`, x is
    the `.transpose(-1, -2)` view of a contiguous tensor with its last two sizes swapped and y is
    contiguous."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    x_shape = [*shape[:-2], shape[-1], shape[-2]] if case.get("transposed") else shape
    x = normal(g, x_shape, case.get("outliers"))
    y = 0.5 * torch.randn(shape, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, y = x.to(dtype).to(device), y.to(dtype).to(device)
    if case.get("transposed"):
        x = x.transpose(-1, -2)
    return (x, y), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 8 * n, "bytes": 3 * n * size}
