"""Sum over the last dimension.

Implement `sum(x)`: return `y` with `y[...] = x[..., 0] + x[..., 1] + ... + x[..., L-1]`, i.e. the
sum over the last dimension, with shape `x.shape[:-1]` (a 1-D input gives a 0-dim tensor) and the
same dtype as `x`.

- `x` is a floating-point tensor (float32, float16 or bfloat16) with at least one dimension and
  `L = x.shape[-1] >= 1`, on the GPU. It may be non-contiguous (for example a transposed 2-D view,
  where the reduced dimension is strided).
- Accumulate in float32 whatever the input dtype, then round the result to the input dtype.
- The input must not be modified.

The result is compared with `x.sum(dim=-1)`: shape and dtype must match exactly. Because the order
of the additions is free, float32 uses rtol = atol = 1e-4; float16 and bfloat16 use the defaults.
Inputs have mean 0.5, so sums grow with `L` and are far from zero.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Reduce"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-4)}


def sum(x: torch.Tensor) -> torch.Tensor:  # noqa: A001 - the task's entry point is named `sum`
    """PyTorch reference."""
    return x.sum(dim=-1)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 1000], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [64, 777], "dtype": "float16"},
    {"name": "bf16_3d_small", "small": True, "shape": [4, 5, 333], "dtype": "bfloat16"},
    {"name": "vector_small", "small": True, "shape": [40961], "dtype": "float32"},
    {"name": "len1_small", "small": True, "shape": [100, 1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [129, 300], "dtype": "float32", "transposed": True},
    {"name": "outliers_small", "small": True, "shape": [50, 2001], "dtype": "float32", "outliers": True},
    {"name": "fp32_8192x8192", "small": False, "shape": [8192, 8192], "dtype": "float32"},
    {"name": "fp16_16384x4096_outliers", "small": False, "shape": [16384, 4096], "dtype": "float16", "outliers": True},
    {"name": "bf16_1M_rows_x_100", "small": False, "shape": [1000003, 100], "dtype": "bfloat16"},
    {"name": "fp32_transposed_4096x8191", "small": False, "shape": [4096, 8191], "dtype": "float32", "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with mean 0.5 and std 1 (outliers: 0.1% of them scaled by 10); a transposed
    case draws the transposed shape and returns its `.t()` view."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"][::-1] if case.get("transposed") else case["shape"]
    x = normal(g, shape, case.get("outliers"))
    x = (x + 0.5).to(getattr(torch, case["dtype"])).to(device)
    if case.get("transposed"):
        x = x.t()
    return (x,), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n, "bytes": (n + n // case["shape"][-1]) * size}
