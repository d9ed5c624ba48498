"""Mean over one dimension.

Implement `mean(x, dim=-1, keepdim=False)`: return the arithmetic mean of `x` along `dim`,

    y[...] = (x[..., 0, ...] + x[..., 1, ...] + ... + x[..., L-1, ...]) / L

with the shape of `x` without dimension `dim` (kept with size 1 when `keepdim` is True) and the dtype of `x`.

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is any
  valid dimension (negative values count from the end) and L = x.shape[dim] >= 1. `x` may be
  non-contiguous (for example a transposed 2-D view, where the reduced dimension is strided).
- Accumulate in float32 whatever the input dtype, divide once by L, and round the result to the
  dtype of `x`.
- The input must not be modified and the output must not share memory with it.

The result is compared with `x.mean(dim=dim, keepdim=keepdim)`: shape and dtype must match exactly.
Because the order of the additions is free, float32 uses rtol = 1e-4, atol = 1e-5; float16 and
bfloat16 use the default tolerance (5e-3 and 1e-2). Inputs have mean 0.5, so means stay away from
zero.
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Reduce"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-5)}


def mean(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """PyTorch reference."""
    return x.mean(dim=dim, keepdim=keepdim)


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
    {"name": "fp32_8192x8192_lastdim", "small": False, "shape": [8192, 8192], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_256x2048x128_middle", "small": False, "shape": [256, 2048, 128], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_4096x8191_lastdim", "small": False, "shape": [4096, 8191], "dim": -1,
     "dtype": "float32", "view": "t"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with mean 0.5 and standard deviation 1 (outliers: 0.1% of the normals scaled by
    10)."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = z + 0.5
    return (finish(x, case, device),), {"dim": case["dim"], "keepdim": case.get("keepdim", False)}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][case["dim"]]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": n * size + rows * size}
