"""SwiGLU activation on a fused gate/up projection (LLaMA-style MLP, "SiluAndMul").

Implement `swiglu(x)`: `x` has shape `[..., 2 * N]` and holds the gate projection in its first
half and the up projection in its second half along the last dimension. Return a new tensor of
shape `[..., N]`:

    gate, up = x[..., :N], x[..., N:]
    out = silu(gate) * up = gate / (1 + exp(-gate)) * up     # float32 math, one rounding to x.dtype

- `x` has dtype float32, float16 or bfloat16 and is contiguous, on the GPU. Its last dimension is
  even; N is arbitrary (not a power of two in general, possibly 1).
- Return a new tensor with dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    gate, up = x.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 6, 256], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [8, 600], "dtype": "bfloat16", "outliers": True},
    {"name": "n1_small", "small": True, "shape": [9, 2], "dtype": "float32"},
    {"name": "programs_small", "small": True, "shape": [3, 4200], "dtype": "float32"},
    {"name": "bf16_4096x22016", "small": False, "shape": [4096, 22016], "dtype": "bfloat16"},
    {"name": "fp16_4x1024x28672_outliers", "small": False, "shape": [4, 1024, 28672], "dtype": "float16",
     "outliers": True},
    {"name": "fp32_2048x16384", "small": False, "shape": [2048, 16384], "dtype": "float32"},
    {"name": "fp16_odd_3000x10250", "small": False, "shape": [3000, 10250], "dtype": "float16"},
]

# Unseen cases (kbx_ray/unseen.py): the last dimension stays even (gate and up halves).
SHAPES = family(multiple={"shape.-1": 2})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: 1.5 * standard normal (outliers: 0.1% scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    x = normal(g, shape, case.get("outliers"), 1.5)
    return (x.to(getattr(torch, case["dtype"])).to(device),), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * n, "bytes": (n + n // 2) * size}
