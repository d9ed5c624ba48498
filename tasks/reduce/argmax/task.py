"""Index of the maximum over one dimension.

Implement `argmax(x, dim=-1, keepdim=False)`: return, for every slice of `x` along `dim`, the index
(0 <= i < L) of its largest element, as an int64 tensor with the shape of `x` without dimension `dim` (kept with size 1 when `keepdim` is True).

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is any
  valid dimension (negative values count from the end) and L = x.shape[dim] >= 1. `x` may be
  non-contiguous (for example a transposed 2-D view, where the reduced dimension is strided).
- Ties: the FIRST (smallest) index among equal maxima wins, as in PyTorch. Ties are common here:
  several cases hold small integer values, and float16/bfloat16 values repeat.
- NaN counts as larger than every number: a slice containing NaN returns the index of its first
  NaN. A slice that is all -inf returns 0.
- Compare in float32 (exact for every input dtype). The input must not be modified.

The result is compared with `torch.argmax(x, dim=dim, keepdim=keepdim)`: shape and dtype (int64)
must match exactly, and every index must be equal.
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Reduce"
LEVEL = 3


def argmax(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """PyTorch reference."""
    return torch.argmax(x, dim=dim, keepdim=keepdim)


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
    {"name": "ties_small", "small": True, "shape": [24, 150], "dim": -1, "dtype": "float32", "ties": True},
    {"name": "bf16_ties_dim0_small", "small": True, "shape": [150, 24], "dim": 0, "dtype": "bfloat16",
     "ties": True},
    {"name": "fp16_ties_3d_small", "small": True, "shape": [3, 100, 7], "dim": -2, "dtype": "float16",
     "ties": True},
    {"name": "negative_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32", "negative": True},
    {"name": "fp32_nans_small", "small": True, "shape": [40, 90], "dim": -1, "dtype": "float32", "nans": True},
    {"name": "fp32_8192x8192_lastdim", "small": False, "shape": [8192, 8192], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_256x2048x128_middle", "small": False, "shape": [256, 2048, 128], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_4096x8191_lastdim", "small": False, "shape": [4096, 8191], "dim": -1,
     "dtype": "float32", "view": "t"},
    {"name": "fp32_nans_4096x4096_lastdim", "small": False, "shape": [4096, 4096], "dim": -1,
     "dtype": "float32", "nans": True},
    {"name": "fp16_ties_8192x4096_lastdim", "small": False, "shape": [8192, 4096], "dim": -1,
     "dtype": "float16", "ties": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10; a negative case uses -|z| - 1, as
    for log-probabilities); a ties case uses round(2 z) clamped to [-6, 4] (many equal maxima);
    a nans case makes each value NaN with probability 0.5 / L (about 40% of the slices hold
    one)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = -z.abs() - 1 if case.get("negative") else z
    if case.get("ties"):  # small integers: many equal maxima per slice
        x = torch.round(2 * z).clamp(-6, 4)
    if case.get("nans"):  # NaN with probability 0.5 / L: about 40% of the slices hold one
        x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.5 / case["shape"][case["dim"]], float("nan"), x)
    return (finish(x, case, device),), {"dim": case["dim"], "keepdim": case.get("keepdim", False)}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][case["dim"]]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": n * size + rows * 8}
