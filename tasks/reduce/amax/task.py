"""Maximum over one dimension (values only).

Implement `amax(x, dim=-1, keepdim=False)`: return the largest element of `x` along `dim`,

    y[...] = max(x[..., 0, ...], x[..., 1, ...], ..., x[..., L-1, ...])

with the shape of `x` without dimension `dim` (kept with size 1 when `keepdim` is True) and the dtype of `x`.

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is any
  valid dimension (negative values count from the end) and L = x.shape[dim] >= 1. `x` may be
  non-contiguous (for example a transposed 2-D view, where the reduced dimension is strided).
- NaN propagates: if a reduced slice contains a NaN the result is NaN (as torch.amax). Values may
  include -inf.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.amax(x, dim=dim, keepdim=keepdim)`: shape and dtype must match
exactly, NaNs must sit in the same places, and values must match (the maximum is exact).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Reduce"
LEVEL = 2


def amax(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """PyTorch reference."""
    return torch.amax(x, dim=dim, keepdim=keepdim)


CASES = [
    {"name": "fp32_lastdim_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32"},
    {"name": "fp16_dim0_small", "small": True, "shape": [300, 8], "dim": 0, "dtype": "float16"},
    {"name": "bf16_3d_middle_small", "small": True, "shape": [3, 150, 5], "dim": 1, "dtype": "bfloat16"},
    {"name": "vector_small", "small": True, "shape": [3001], "dim": 0, "dtype": "float32"},
    {"name": "len1_keepdim_small", "small": True, "shape": [100, 1], "dim": -1, "dtype": "float32",
     "keepdim": True},
    {"name": "transposed_small", "small": True, "shape": [129, 30], "dim": -1, "dtype": "float32", "view": "t"},
    {"name": "outliers_keepdim_small", "small": True, "shape": [40, 81], "dim": 0, "dtype": "float32",
     "outliers": True, "keepdim": True},
    {"name": "bf16_rows_small", "small": True, "shape": [24, 150], "dim": -1, "dtype": "bfloat16"},
    {"name": "nans_small", "small": True, "shape": [40, 81], "dim": -1, "dtype": "float32", "nans": True},
    {"name": "negative_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32", "negative": True},
    {"name": "fp32_8192x8192_lastdim", "small": False, "shape": [8192, 8192], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_256x2048x128_middle", "small": False, "shape": [256, 2048, 128], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_4096x8191_lastdim", "small": False, "shape": [4096, 8191], "dim": -1,
     "dtype": "float32", "view": "t"},
    {"name": "fp32_nans_4096x4096_lastdim", "small": False, "shape": [4096, 4096], "dim": -1,
     "dtype": "float32", "nans": True},
    {"name": "bf16_nans_8192x4096_dim0", "small": False, "shape": [8192, 4096], "dim": 0, "dtype": "bfloat16",
     "nans": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10; a negative case uses -|z| - 1, as
    for log-probabilities); a nans case makes each value NaN with probability 0.5 / L (about
    40% of the slices hold one)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = -z.abs() - 1 if case.get("negative") else z
    if case.get("nans"):  # NaN with probability 0.5 / L: about 40% of the slices hold one
        x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.5 / case["shape"][case["dim"]], float("nan"), x)
    return (finish(x, case, device),), {"dim": case["dim"], "keepdim": case.get("keepdim", False)}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][case["dim"]]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": n * size + rows * size}
