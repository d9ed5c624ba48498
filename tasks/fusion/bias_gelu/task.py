"""Fused bias add + exact GELU (the epilogue of a transformer MLP's first linear layer).

Implement `bias_gelu(x, bias)`: add a per-feature bias along the last dimension and apply the
exact (erf-based) GELU, returning a new tensor:

    s   = x + bias                                # bias broadcast over all leading dimensions
    out = 0.5 * s * (1 + erf(s / sqrt(2)))        # computed in float32, rounded once to x.dtype

- `x` has shape `[..., N]` and dtype float32, float16 or bfloat16, on the GPU; `bias` has shape
  `[N]` and the dtype of `x`. The last dimension of `x` is contiguous, but its rows need not be
  adjacent (for example `x` may be a column slice of a wider tensor).
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.
- The tanh approximation of GELU is not accurate enough for float32.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    return torch.nn.functional.gelu(x.float() + bias.float()).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [3, 5, 96], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [16, 257], "dtype": "bfloat16", "outliers": True},
    {"name": "n1_small", "small": True, "shape": [7, 1], "dtype": "float32"},
    {"name": "sliced_small", "small": True, "shape": [20, 64], "dtype": "float32", "sliced": True},
    {"name": "fp16_4x1024x11008", "small": False, "shape": [4, 1024, 11008], "dtype": "float16"},
    {"name": "bf16_8192x5120_outliers", "small": False, "shape": [8192, 5120], "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp32_sliced_4096x4100", "small": False, "shape": [4096, 4100], "dtype": "float32", "sliced": True},
    {"name": "fp16_16384x4100", "small": False, "shape": [16384, 4100], "dtype": "float16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); bias: 0.5 * normal. A sliced case returns
    the first N columns of a tensor 9 columns wider, so rows are not adjacent."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    n = shape[-1]
    full = shape[:-1] + [n + 9] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"))
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, bias = x.to(dtype).to(device), bias.to(dtype).to(device)
    if case.get("sliced"):
        x = x[..., :n]
    return (x, bias), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 10 * n, "bytes": (2 * n + case["shape"][-1]) * size}
