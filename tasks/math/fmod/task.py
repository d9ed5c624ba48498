"""Elementwise C-style floating-point remainder (sign of the dividend).

Implement `fmod(x, y)`: return a new tensor, elementwise over the broadcast operands,

    out = x - trunc(x / y) * y      (exactly, as C fmod)

- `x` and `y` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose shapes
  broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]); the
  result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may be
  non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- The result is exact (the remainder of two floats is always representable): it has the sign of x
  and |out| < |y|. Computing x - trunc(x / y) * y naively in float32 is not exact: the rounded
  quotient and product are off whenever x / y is large or near an integer.
- y == 0 gives NaN. Inputs are finite and |x / y| stays below 2**20.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.fmod(x, y)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands, signed_magnitudes, sprinkle

CATEGORY = "Math"
LEVEL = 2


def fmod(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.fmod(x, y)


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
    {"name": "integers_small", "small": True, "shapes": [[37, 101], [37, 101]], "dtype": "float32",
     "integers": True},
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
    """x: normal values with standard deviation 8; y: magnitudes uniform in [0.5, 2] with random signs
    (outliers: 0.1% of every operand's normals scaled by 10). An integers case rounds both to
    integers (many exact zeros); a zero-divisor case sets 2% of y to 0."""
    g = torch.Generator(device).manual_seed(seed)
    zs = operands(g, case)
    x = 8 * zs[0]
    y = signed_magnitudes(g, zs[1])  # |y| in [0.5, 2]
    if case.get("integers"):  # integer operands: many exact-zero remainders
        x, y = torch.round(x), torch.ceil(torch.abs(y)) * torch.sign(y)
    if case.get("zeros"):  # 2% zero divisors -> NaN
        y = sprinkle(g, y, 0.02, 0.0)
    return finish_operands((x, y), case, device), {}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 4)
