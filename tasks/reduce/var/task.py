"""Variance over one dimension, with a degrees-of-freedom correction.

Implement `var(x, dim=-1, correction=1, keepdim=False)`: with L = x.shape[dim] and
mu = the mean of the slice, return

    y[...] = sum_i (x[..., i, ...] - mu) ** 2 / (L - correction)

with the shape of `x` without dimension `dim` (kept with size 1 when `keepdim` is True) and the dtype of `x`. correction = 1 is the unbiased sample variance,
correction = 0 the population variance.

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is any
  valid dimension (negative values count from the end) and L = x.shape[dim] >= 1. `x` may be
  non-contiguous (for example a transposed 2-D view, where the reduced dimension is strided).
- `correction` is 0 or 1 and L > correction.
- Numerically stable: several cases have a mean of about 100 with a standard deviation of 1, where
  the one-pass formula E[x**2] - E[x]**2 in float32 loses most digits. Use two passes, Welford, or a
  chunked (Chan et al.) merge, accumulating in float32; round once to the dtype of `x`.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.var(x, dim=dim, correction=correction, keepdim=keepdim)`: shape
and dtype must match exactly. float32 uses rtol = 1e-4, atol = 1e-5 (the summation order is free);
float16 and bfloat16 use the default tolerance (5e-3 and 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Reduce"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-5)}


def var(x: torch.Tensor, dim: int = -1, correction: int = 1, keepdim: bool = False) -> torch.Tensor:
    """PyTorch reference."""
    return torch.var(x, dim=dim, correction=correction, keepdim=keepdim)


CASES = [
    {"name": "fp32_lastdim_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32"},
    {"name": "fp16_dim0_small", "small": True, "shape": [300, 8], "dim": 0, "dtype": "float16",
     "correction": 0},
    {"name": "bf16_3d_middle_small", "small": True, "shape": [3, 150, 5], "dim": 1, "dtype": "bfloat16"},
    {"name": "vector_shifted_small", "small": True, "shape": [3001], "dim": 0, "dtype": "float32",
     "shift": 100.0},
    {"name": "len2_keepdim_small", "small": True, "shape": [100, 2], "dim": -1, "dtype": "float32",
     "keepdim": True},
    {"name": "transposed_shifted_small", "small": True, "shape": [129, 30], "dim": -1, "dtype": "float32",
     "view": "t", "shift": 100.0},
    {"name": "outliers_keepdim_small", "small": True, "shape": [40, 81], "dim": 0, "dtype": "float32",
     "outliers": True, "keepdim": True, "correction": 0},
    {"name": "shifted_lastdim_small", "small": True, "shape": [2, 2000], "dim": -1, "dtype": "float32",
     "shift": 100.0},
    {"name": "fp16_shifted_small", "small": True, "shape": [8, 300], "dim": -1, "dtype": "float16",
     "shift": 100.0},
    {"name": "fp32_shifted_8192x8192_lastdim", "small": False, "shape": [8192, 8192], "dim": -1,
     "dtype": "float32", "shift": 100.0},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_256x2048x128_middle", "small": False, "shape": [256, 2048, 128], "dim": 1,
     "dtype": "bfloat16", "correction": 0},
    {"name": "fp32_transposed_shifted_4096x8191", "small": False, "shape": [4096, 8191], "dim": -1,
     "dtype": "float32", "view": "t", "shift": 100.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10), shifted by the case's `shift` (100 in the
    shifted cases, else 0)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = z + case.get("shift", 0.0)
    return (finish(x, case, device),), {"dim": case["dim"], "correction": case.get("correction", 1), "keepdim": case.get("keepdim", False)}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][case["dim"]]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * n, "bytes": n * size + rows * size}
