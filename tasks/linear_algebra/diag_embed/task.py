"""Embed vectors as the diagonal of square matrices (diag_embed with an offset).

Implement `diag_embed(x, offset=0)`: for `x` of shape [B, N], return a new tensor `out` of shape
[B, L, L] with L = N + |offset| and the dtype of `x`, zero everywhere except one diagonal:

    out[b, i, i + offset] = x[b, i]        for offset >= 0, i in [0, N)
    out[b, i - offset, i] = x[b, i]        for offset < 0,  i in [0, N)

This is `torch.diag_embed(x, offset, dim1=-2, dim2=-1)`.

- dtype is float32, float16 or bfloat16. B >= 1, N >= 1; `offset` may be positive, negative or 0.
- `x` may be non-contiguous (for example a transposed [N, B] tensor). Every element of the output
  must be written (zeros included): the output is a freshly allocated contiguous tensor.
- Inputs must not be modified.

The result is compared with the PyTorch call above exactly (it is a copy; rtol = atol = 0).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def diag_embed(x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.diag_embed(x, offset, dim1=-2, dim2=-1)


CASES = [
    {"name": "fp32_small", "small": True, "b": 4, "n": 30, "offset": 0, "dtype": "float32"},
    {"name": "fp16_pos_offset_small", "small": True, "b": 3, "n": 17, "offset": 2, "dtype": "float16"},
    {"name": "bf16_neg_offset_small", "small": True, "b": 2, "n": 40, "offset": -5, "dtype": "bfloat16"},
    {"name": "n1_small", "small": True, "b": 50, "n": 1, "offset": 3, "dtype": "float32"},
    {"name": "transposed_outliers_small", "small": True, "b": 5, "n": 33, "offset": -1, "dtype": "float32",
     "transposed": True, "outliers": True},
    {"name": "fp32_2048x256", "small": False, "b": 2048, "n": 256, "offset": 0, "dtype": "float32"},
    {"name": "fp16_512x1000_offset3", "small": False, "b": 512, "n": 1000, "offset": 3, "dtype": "float16",
     "outliers": True},
    {"name": "bf16_transposed_32x4095_offset-2", "small": False, "b": 32, "n": 4095, "offset": -2,
     "dtype": "bfloat16", "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal x (outliers: 0.1% scaled by 10); a transposed case draws [N, B] and returns
    its `.t()` view."""
    g = torch.Generator(device).manual_seed(seed)
    b, n = case["b"], case["n"]
    shape = [n, b] if case.get("transposed") else [b, n]
    x = normal(g, shape, case.get("outliers"))
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("transposed"):
        x = x.t()
    return (x, case["offset"]), {}


def cost(case: dict) -> dict:
    b, n = case["b"], case["n"]
    side = n + abs(case["offset"])
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 0, "bytes": (b * n + b * side * side) * size}
