"""Elementwise linear interpolation with a tensor weight.

Implement `lerp(input, end, weight)`: return a new tensor, elementwise over the broadcast operands,

    out = input + weight * (end - input)

- `input`, `end` and `weight` are tensors of one dtype (float32, float16 or bfloat16) on the GPU
  whose shapes broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1,
  M]); the result has the broadcast shape and that dtype and is a new contiguous tensor. Operands
  may be non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- Evaluate it as PyTorch does, for accuracy at both ends: input + weight * (end - input) when
  |weight| < 0.5, else end - (end - input) * (1 - weight).
- Weights outside [0, 1] extrapolate.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.lerp(input, end, weight)`: shape and dtype must match exactly,
NaN and infinities must sit in the same places, and finite values must agree within the default
tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands

CATEGORY = "Math"
LEVEL = 2


def lerp(input: torch.Tensor, end: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.lerp(input, end, weight)


CASES = [
    {"name": "fp32_same_shape_small", "small": True, "shapes": [[37, 101], [37, 101], [37, 101]],
     "dtype": "float32"},
    {"name": "fp16_row_broadcast_small", "small": True, "shapes": [[33, 100], [100], [33, 1]],
     "dtype": "float16"},
    {"name": "bf16_outer_small", "small": True, "shapes": [[40, 1], [1, 70], [1]], "dtype": "bfloat16"},
    {"name": "fp32_3d_broadcast_small", "small": True, "shapes": [[4, 1, 50], [9, 1], [4, 9, 50]],
     "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [33, 65], [65]],
     "views": ["t", None, None], "dtype": "float32"},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300], [5, 300]],
     "views": [None, "s", "t"], "dtype": "float16"},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001], [4001]], "dtype": "float32",
     "outliers": True},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096], [4096, 4096]],
     "dtype": "float32"},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096, 4096], [4096]],
     "dtype": "float16", "outliers": True},
    {"name": "bf16_broadcast_16M", "small": False, "shapes": [[4096, 1], [1, 4096], [4096, 4096]],
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200], [4000, 4200]],
     "views": ["t", None, None], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input and end: standard normal values (outliers: 0.1% scaled by 10); weight: uniform in [-0.25,
    1.25)."""
    g = torch.Generator(device).manual_seed(seed)
    zs = operands(g, case)
    s, e = zs[0], zs[1]
    w = 1.5 * torch.rand(zs[2].shape, generator=g, device=g.device) - 0.25  # weights in [-0.25, 1.25): some extrapolate
    return finish_operands((s, e, w), case, device), {}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 3)
