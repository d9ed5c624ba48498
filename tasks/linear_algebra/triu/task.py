"""Upper-triangular part of a (batch of) matrices.

Implement `triu(x, diagonal=0)`: for `x` of shape [..., M, N], return a new tensor of the same
shape and dtype in which element (i, j) of every matrix (the last two dimensions) is copied from
`x` when `j - i >= diagonal` and is 0 otherwise:

    out[..., i, j] = x[..., i, j] if j - i >= diagonal else 0

- `diagonal` is any integer: 0 keeps the main diagonal and above, a positive value drops that many
  more diagonals, a negative value keeps that many diagonals below the main one as well (values
  beyond the matrix keep everything or nothing).
- dtype is float32, float16 or bfloat16; `x` has 2 or 3 dimensions and may be non-contiguous (for
  example the transpose of the last two dimensions). The output is contiguous. Inputs must not
  be modified.

The result is compared with `torch.triu(x, diagonal)` exactly (it is a copy; rtol = atol = 0).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 1
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def triu(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.triu(x, diagonal)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 45], "diagonal": 0, "dtype": "float32"},
    {"name": "fp16_neg_diag_small", "small": True, "shape": [3, 20, 17], "diagonal": -3, "dtype": "float16"},
    {"name": "bf16_pos_diag_small", "small": True, "shape": [2, 30, 40], "diagonal": 5, "dtype": "bfloat16"},
    {"name": "diag_beyond_small", "small": True, "shape": [9, 1, 33], "diagonal": -40, "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [2, 50, 31], "diagonal": 1, "dtype": "float32",
     "transposed": True},
    {"name": "outliers_small", "small": True, "shape": [64, 64], "diagonal": -70, "dtype": "float32",
     "outliers": True},
    {"name": "fp32_8192x8192", "small": False, "shape": [8192, 8192], "diagonal": 0, "dtype": "float32"},
    {"name": "fp16_batch_64x1000x1500_diag-7", "small": False, "shape": [64, 1000, 1500], "diagonal": -7,
     "dtype": "float16"},
    {"name": "bf16_transposed_16x2048x2049", "small": False, "shape": [16, 2048, 2049], "diagonal": 3,
     "dtype": "bfloat16", "transposed": True, "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries (outliers: 0.1% scaled by 10). A transposed case draws the shape
    with its last two dimensions swapped and returns `.transpose(-1, -2)` of it."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    if case.get("transposed"):
        shape[-1], shape[-2] = shape[-2], shape[-1]
    x = normal(g, shape, case.get("outliers"))
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("transposed"):
        x = x.transpose(-1, -2)
    return (x, case["diagonal"]), {}


def cost(case: dict) -> dict:
    """The whole output is written; only the kept elements (j - i >= diagonal) need reading."""
    n = 1
    for s in case["shape"]:
        n *= s
    m, cols, diag = case["shape"][-2], case["shape"][-1], case["diagonal"]
    kept = n // (m * cols) * sum(max(0, cols - max(0, i + diag)) for i in range(m)) if n else 0
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 0, "bytes": (n + kept) * size}
