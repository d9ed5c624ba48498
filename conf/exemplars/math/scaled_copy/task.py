"""Scaled copy.

Implement `scaled_copy(x, alpha=2.0)`: return a new tensor `y = alpha * x` with the shape and dtype
of `x`; compute in float32 and round to the dtype of `x`. `x` is a contiguous floating-point tensor.
"""
import torch

CATEGORY = "Math"
LEVEL = 1


def scaled_copy(x: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    """PyTorch reference."""
    return (x.float() * alpha).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [333, 7], "dtype": "float32", "alpha": 2.0},
    {"name": "bf16_small", "small": True, "shape": [5000], "dtype": "bfloat16", "alpha": -0.5},
    {"name": "fp16_16M", "small": False, "shape": [4096, 4096], "dtype": "float16", "alpha": 3.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["shape"], generator=g).to(getattr(torch, case["dtype"])).to(device)
    return (x,), {"alpha": case["alpha"]}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n, "bytes": 2 * n * size}
