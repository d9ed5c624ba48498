"""Euclidean (L2) norm over the last dimension.

Implement `vector_norm(x)`: for `x` of shape [..., D], return a new tensor `out` of shape [...]
(the last dimension removed) and the dtype of `x` with

    out[...] = sqrt(sum over d of x[..., d] ** 2)

This is `torch.linalg.vector_norm(x, ord=2, dim=-1)`.

- dtype is float32, float16 or bfloat16. Square and accumulate in float32, take the square root in
  float32 and round once to the output dtype. No special overflow handling is needed: all values
  are moderate.
- `x` has 2 or 3 dimensions; D and the number of rows are arbitrary (D may be 1). Rows need not be
  adjacent (for example the first D columns of a wider tensor). Inputs must not be modified.

Compared with the PyTorch call above; the order of the additions is free, so float32 uses
rtol = atol = 1e-4; float16 and bfloat16 use their default tolerances.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-4)}


def vector_norm(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.linalg.vector_norm(x, ord=2, dim=-1)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [16, 1000], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 7, 300], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [9, 513], "dtype": "bfloat16"},
    {"name": "d1_small", "small": True, "shape": [777, 1], "dtype": "float32"},
    {"name": "one_row_small", "small": True, "shape": [1, 5000], "dtype": "float32"},
    {"name": "sliced_outliers_small", "small": True, "shape": [33, 100], "dtype": "float32", "sliced": True,
     "outliers": True},
    {"name": "fp32_32768x1024", "small": False, "shape": [32768, 1024], "dtype": "float32"},
    {"name": "fp16_4x8192x4096_outliers", "small": False, "shape": [4, 8192, 4096], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_sliced_65536x500", "small": False, "shape": [65536, 500], "dtype": "bfloat16",
     "sliced": True},
    {"name": "fp32_512x65537", "small": False, "shape": [512, 65537], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal entries with per-row scales in [0.1, 2] (outliers: 0.1% scaled by 10). A sliced case
    returns the first D columns of a tensor 9 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 9] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"))
    x = x * (0.1 + 1.9 * torch.rand(full[:-1] + [1], generator=g, device=g.device))
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("sliced"):
        x = x[..., :d]
    return (x,), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][-1]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 2 * n, "bytes": (n + rows) * size}
