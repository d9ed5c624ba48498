"""Elementwise scaled addition with broadcasting.

Implement `add(x, y, alpha)`: return a new tensor, elementwise over the broadcast operands,

    out = x + alpha * y

- `x` and `y` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose shapes
  broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]); the
  result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may be
  non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `alpha` is a Python float (default 1.0).
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.add(x, y, alpha=alpha)`: shape and dtype must match exactly,
NaN and infinities must sit in the same places, and finite values must agree within the default
tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands

CATEGORY = "Math"
LEVEL = 2


def add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.add(x, y, alpha=alpha)


CASES = [
    {"name": "fp32_same_shape_small", "small": True, "shapes": [[37, 101], [37, 101]], "dtype": "float32",
     "alpha": 1.0},
    {"name": "fp16_row_broadcast_small", "small": True, "shapes": [[33, 100], [100]], "dtype": "float16",
     "alpha": -0.5},
    {"name": "bf16_outer_small", "small": True, "shapes": [[40, 1], [1, 70]], "dtype": "bfloat16",
     "alpha": 2.0},
    {"name": "fp32_3d_broadcast_small", "small": True, "shapes": [[4, 1, 50], [9, 1]], "dtype": "float32",
     "alpha": 1.0},
    {"name": "scalar_like_small", "small": True, "shapes": [[1], [3001]], "dtype": "float32", "alpha": 0.25},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [33, 65]], "views": ["t", None],
     "dtype": "float32", "alpha": 1.0},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300]], "views": [None, "s"],
     "dtype": "float16", "alpha": -1.0},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001]], "dtype": "float32", "outliers": True,
     "alpha": 3.0},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096]], "dtype": "float32",
     "alpha": 1.0},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096]], "dtype": "float16",
     "outliers": True, "alpha": -1.0},
    {"name": "bf16_outer_16M", "small": False, "shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16",
     "alpha": 0.5},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200]],
     "views": ["t", None], "dtype": "float32", "alpha": 1.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    x, y = operands(g, case)
    return finish_operands((x, y), case, device), {k: case[k] for k in ('alpha',) if k in case}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 2)
