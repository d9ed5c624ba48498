"""Maximum of each row.

Implement `row_max(x)`: for a contiguous 2-D floating-point tensor `x` of shape (M, N), N >= 1,
return `y` of shape (M,) and the dtype of `x` with `y[i] = max_j x[i, j]`.
"""
import torch

CATEGORY = "Reduce"
LEVEL = 2


def row_max(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return x.amax(dim=1)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 1000], "dtype": "float32"},
    {"name": "fp16_one_col_small", "small": True, "shape": [64, 1], "dtype": "float16"},
    {"name": "fp32_8192x8192", "small": False, "shape": [8192, 8192], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["shape"], generator=g).to(getattr(torch, case["dtype"])).to(device)
    return (x,), {}


def cost(case: dict) -> dict:
    m, n = case["shape"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": m * n, "bytes": (m * n + m) * size}
