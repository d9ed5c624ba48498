"""Elementwise true division with broadcasting.

Implement `div(x, y)`: return a new tensor, elementwise over the broadcast operands,

    out = x / y

- `x` and `y` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose shapes
  broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]); the
  result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may be
  non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- True division (no rounding mode). IEEE rules: x / 0 is +-inf with the sign of x, 0 / 0 is NaN.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.div(x, y)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands, signed_magnitudes

CATEGORY = "Math"
LEVEL = 2


def div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.div(x, y)


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
    {"name": "zero_divisor_small", "small": True, "shapes": [[2001], [2001]], "dtype": "float32",
     "zeros": True},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096]], "dtype": "float32"},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096]], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_outer_16M", "small": False, "shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200]],
     "views": ["t", None], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal values; y: magnitudes uniform in [0.5, 2] with random signs (outliers: 0.1%
    of every operand's normals scaled by 10); a zero-divisor case sets 2% of y to 0 and half of
    those x to 0."""
    g = torch.Generator(device).manual_seed(seed)
    zs = operands(g, case)
    x = zs[0]
    y = signed_magnitudes(g, zs[1])  # |y| in [0.5, 2]
    if case.get("zeros"):  # 2% zero divisors, half of them over a zero dividend (0 / 0 = NaN)
        u = torch.rand(y.shape, generator=g, device=g.device)
        y = torch.where(u < 0.02, 0.0, y)
        x = torch.where(u < 0.01, 0.0, x)
    return finish_operands((x, y), case, device), {}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 1)
