"""Elementwise two-argument arctangent.

Implement `atan2(input, other)`: return a new tensor, elementwise over the broadcast operands,

    out = atan2(input, other)   (the angle in [-pi, pi] of the point (x = other, y = input))

- `input` and `other` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose
  shapes broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]);
  the result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may
  be non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- Quadrants and signed zeros as C atan2: atan2(+-0, x) = +-0 for x > 0 or x = +0 and +-pi for x < 0
  or x = -0 (the branch cut: atan2(-0, -1) = -pi), atan2(y, +-0) = +-pi/2 for y != 0. Inputs are
  finite; every case holds points on the axes with both signs of zero (a half-precision cast of a
  tiny negative value is -0 too).
- float32 results must be accurate to about 1e-6 relative (a short polynomial is not enough);
  triton.language has no arctangent.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.atan2(input, other)`: shape and dtype must match exactly, NaN
and infinities must sit in the same places, and finite values must agree within the default
tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, edges, finish_operands, operands, sprinkle

CATEGORY = "Math"
LEVEL = 3


def atan2(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.atan2(input, other)


CASES = [
    {"name": "fp32_same_shape_small", "small": True, "shapes": [[37, 101], [37, 101]], "dtype": "float32"},
    {"name": "fp16_row_broadcast_small", "small": True, "shapes": [[33, 100], [100]], "dtype": "float16"},
    {"name": "bf16_outer_small", "small": True, "shapes": [[40, 1], [1, 70]], "dtype": "bfloat16"},
    {"name": "fp32_3d_broadcast_small", "small": True, "shapes": [[4, 1, 50], [9, 1]], "dtype": "float32"},
    {"name": "scalar_like_small", "small": True, "shapes": [[1], [3001]], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [33, 65]], "views": ["t", None],
     "dtype": "float32"},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300]], "views": [None, "s"],
     "dtype": "float16"},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001]], "dtype": "float32", "outliers": True},
    {"name": "axes_small", "small": True, "shapes": [[37, 101], [37, 101]], "dtype": "float32", "axes": True},
    {"name": "fp16_axes_small", "small": True, "shapes": [[33, 100], [100]], "dtype": "float16", "axes": True},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096]], "dtype": "float32"},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096]], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_outer_16M", "small": False, "shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200]],
     "views": ["t", None], "dtype": "float32"},
]


# The first elements of each operand's first row, in every case: (y, x) = (-0, -1) -> -pi, (+0, -1)
# -> pi, (-0, -0) -> -pi, (+0, -0) -> pi, (-0, 2) -> -0, (1, -0) -> pi/2; broadcast operands meet
# each other's drawn values too. A random draw produces them only sometimes (the oracle must not).
BRANCH_CUT = ((-0.0, 0.0, -0.0, 0.0, -0.0, 1.0), (-1.0, -1.0, -0.0, -0.0, 2.0, -0.0))


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10); an axes case sets 10% of each operand to
    +0; every case then holds the branch cut's points (`BRANCH_CUT`)."""
    g = torch.Generator(device).manual_seed(seed)
    a, b = operands(g, case)
    if case.get("axes"):  # 10% exact zeros in each operand: points on the axes and the origin
        a = sprinkle(g, a, 0.1, 0.0)
        b = sprinkle(g, b, 0.1, 0.0)
    return tuple(edges(t, v) for t, v in zip(finish_operands((a, b), case, device), BRANCH_CUT)), {}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 20)
