"""Fused bias add + tanh-approximated GELU (GPT-2's "gelu_new" MLP epilogue).

Implement `bias_gelu_tanh(x, bias)`: add a per-feature bias along the last dimension and apply
GELU with the tanh approximation, returning a new tensor:

    s   = x + bias                                              # bias broadcast over leading dims
    out = 0.5 * s * (1 + tanh(sqrt(2 / pi) * (s + 0.044715 * s**3)))

- Compute in float32 and round once to the dtype of `x`. This is
  `torch.nn.functional.gelu(s, approximate="tanh")`, not the exact erf GELU.
- `x` has shape `[..., N]` and dtype float32, float16 or bfloat16, on the GPU; `bias` has shape
  `[N]` and the dtype of `x`. The last dimension of `x` is contiguous, but its rows need not be
  adjacent (for example `x` may be a column slice of a wider tensor).
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def bias_gelu_tanh(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    return torch.nn.functional.gelu(x.float() + bias.float(), approximate="tanh").to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 9, 160], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [8, 500], "dtype": "bfloat16", "outliers": True},
    {"name": "n1_small", "small": True, "shape": [5, 1], "dtype": "float32"},
    {"name": "sliced_outliers_small", "small": True, "shape": [20, 96], "dtype": "float32", "sliced": True,
     "outliers": True},
    {"name": "fp16_8x1024x3072", "small": False, "shape": [8, 1024, 3072], "dtype": "float16"},
    {"name": "bf16_4096x6400_outliers", "small": False, "shape": [4096, 6400], "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp32_sliced_8192x3000", "small": False, "shape": [8192, 3000], "dtype": "float32", "sliced": True},
    {"name": "fp16_65536x768", "small": False, "shape": [65536, 768], "dtype": "float16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: 1.5 * standard normal (outliers: 0.1% scaled by 10); bias: 0.5 * normal. A sliced case
    returns the first N columns of a tensor 5 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    n = shape[-1]
    full = shape[:-1] + [n + 5] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"), 1.5)
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
    return {"flops": 12 * n, "bytes": (2 * n + case["shape"][-1]) * size}
