"""Elementwise sum of two tensors.

Implement `vector_add(x, y)`: return a new tensor `z = x + y` with the shape and dtype of `x`.
`x` and `y` are contiguous floating-point tensors of the same shape and dtype.
"""
import torch

CATEGORY = "Math"
LEVEL = 1


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return x + y


CASES = [
    {"name": "fp32_small", "small": True, "shape": [1000, 37], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [4097], "dtype": "float16"},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    x, y = (torch.randn(case["shape"], generator=g).to(dtype).to(device) for _ in range(2))
    return (x, y), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n, "bytes": 3 * n * size}
