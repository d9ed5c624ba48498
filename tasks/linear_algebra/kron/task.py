"""Kronecker product of two matrices.

Implement `kron(a, b)`: for a matrix `a` of shape [M, N] and a matrix `b` of shape [P, Q] with
the same dtype, return a new tensor `out` of shape [M * P, N * Q] and that dtype with

    out[i * P + k, j * Q + l] = a[i, j] * b[k, l]

This is `torch.kron(a, b)`: each entry a[i, j] scales a full copy of `b` placed at block (i, j).

- dtype is float32 or float16 (for float16, multiply in float32 and round once; this equals
  PyTorch's result). All sizes are arbitrary (any may be 1). `a` and `b` may be non-contiguous
  (for example transposed views). Inputs must not be modified.

Compared with the PyTorch call above using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3


def kron(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.kron(a, b)


CASES = [
    {"name": "fp32_small", "small": True, "a": [5, 7], "b": [9, 11], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "a": [3, 4], "b": [17, 33], "dtype": "float16"},
    {"name": "vector_like_small", "small": True, "a": [1, 13], "b": [40, 1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "a": [6, 5], "b": [20, 12], "dtype": "float32",
     "transposed": True},
    {"name": "outliers_small", "small": True, "a": [8, 8], "b": [16, 16], "dtype": "float32", "outliers": True},
    {"name": "columns_small", "small": True, "a": [3, 1], "b": [4, 1], "dtype": "float32"},
    {"name": "fp32_64x64_by_128x128", "small": False, "a": [64, 64], "b": [128, 128], "dtype": "float32"},
    {"name": "fp16_100x37_by_97x301_outliers", "small": False, "a": [100, 37], "b": [97, 301],
     "dtype": "float16", "outliers": True},
    {"name": "fp32_transposed_2000x3_by_5x1999", "small": False, "a": [2000, 3], "b": [5, 1999],
     "dtype": "float32", "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries (outliers: 0.1% scaled by 10). A transposed case draws both
    matrices with swapped dimensions and returns their `.t()` views."""
    g = torch.Generator(device).manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    t = case.get("transposed", False)
    mats = []
    for shape in (case["a"], case["b"]):
        x = normal(g, shape[::-1] if t else shape, case.get("outliers", False)).to(dtype).to(device)
        mats.append(x.t() if t else x)
    return tuple(mats), {}


def cost(case: dict) -> dict:
    (m, n), (p, q) = case["a"], case["b"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": m * n * p * q, "bytes": (m * n + p * q + m * n * p * q) * size}
