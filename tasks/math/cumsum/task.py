"""Cumulative sum along one dimension.

Implement `cumsum(x, dim)`: return a new tensor with the shape and dtype of `x` where

    y[..., i, ...] = x[..., 0, ...] + x[..., 1, ...] + ... + x[..., i, ...]     (i along `dim`)

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is
  any valid dimension (negative values count from the end). `x` may be non-contiguous (for example
  a transposed 2-D view, where the scanned dimension is strided); the output is contiguous.
- Accumulate in float32 whatever the input dtype (the running sum must not be rounded to
  float16/bfloat16 between steps); round each output once to the dtype of `x`.
- Scans are long (up to 16384 elements). The input must not be modified and the output must not
  share memory with it.

The result is compared with `torch.cumsum(x.float(), dim).to(x.dtype)`: shape and dtype must match exactly. Because the
order of the additions is free, float32 uses rtol = atol = 1e-4; float16 and bfloat16 use the
default tolerance (5e-3 and 1e-2). Inputs have mean 0.5, so running sums grow steadily.
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Math"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """PyTorch reference: computed in float32 and rounded once, as specified (on a GPU, torch's own
    half-precision scan along a non-last dimension drifts by several ulps from that)."""
    return torch.cumsum(x.float(), dim).to(x.dtype)


CASES = [
    {"name": "fp32_lastdim_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32"},
    {"name": "fp16_dim0_small", "small": True, "shape": [300, 8], "dim": 0, "dtype": "float16"},
    {"name": "bf16_3d_middle_small", "small": True, "shape": [3, 150, 5], "dim": 1, "dtype": "bfloat16"},
    {"name": "vector_small", "small": True, "shape": [3001], "dim": 0, "dtype": "float32"},
    {"name": "len1_small", "small": True, "shape": [100, 1], "dim": -1, "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [129, 30], "dim": -1, "dtype": "float32", "view": "t"},
    {"name": "outliers_dim0_small", "small": True, "shape": [40, 81], "dim": 0, "dtype": "float32",
     "outliers": True},
    {"name": "fp32_4096x4096_lastdim", "small": False, "shape": [4096, 4096], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_32x2048x1024_middle", "small": False, "shape": [32, 2048, 1024], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_8192x4095_lastdim", "small": False, "shape": [8192, 4095], "dim": -1,
     "dtype": "float32", "view": "t"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with mean 0.5 and standard deviation 1 (outliers: 0.1% of the normals scaled by
    10)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = z + 0.5
    return (finish(x, case, device),), {"dim": case["dim"]}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": 2 * n * size}
