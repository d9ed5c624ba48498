"""Elementwise clamp between tensor bounds.

Implement `clamp(x, min, max)`: return a new tensor, elementwise over the broadcast operands,

    out = minimum(maximum(x, min), max)

- `x`, `min` and `max` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose
  shapes broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]);
  the result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may
  be non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `min` and `max` are tensors that broadcast against `x` (per-column or per-row bounds, or full
  tensors). Where min > max the result is max, as in PyTorch.
- NaN in `x` propagates to the output (the bounds are never NaN). Exact: every result is one of the
  inputs.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.clamp(x, min, max)`: shape and dtype must match exactly, NaN
and infinities must sit in the same places, and finite values must agree within the default
tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands, sprinkle

CATEGORY = "Math"
LEVEL = 2


def clamp(x: torch.Tensor, min: torch.Tensor, max: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.clamp(x, min, max)


CASES = [
    {"name": "fp32_column_bounds_small", "small": True, "shapes": [[37, 101], [101], [101]],
     "dtype": "float32"},
    {"name": "fp16_row_bounds_small", "small": True, "shapes": [[33, 100], [33, 1], [1]], "dtype": "float16"},
    {"name": "bf16_mixed_bounds_small", "small": True, "shapes": [[40, 70], [1, 70], [40, 1]],
     "dtype": "bfloat16"},
    {"name": "fp32_3d_small", "small": True, "shapes": [[4, 9, 50], [9, 1], [4, 1, 50]], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [65], [33, 65]], "views": ["t", None, "t"],
     "dtype": "float32"},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300], [300]], "views": ["s", None, None],
     "dtype": "float16"},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001], [4001]], "dtype": "float32",
     "outliers": True},
    {"name": "fp32_nans_small", "small": True, "shapes": [[30, 70], [70], [30, 1]], "dtype": "float32",
     "nans": True},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096], [4096]], "dtype": "float32"},
    {"name": "fp16_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096, 1], [1]], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_16M_full_bounds", "small": False, "shapes": [[16777216], [16777216], [16777216]],
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4200], [4000, 1]],
     "views": ["t", None, None], "dtype": "float32"},
    {"name": "fp32_nans_16M", "small": False, "shapes": [[4096, 4096], [4096], [4096, 1]], "dtype": "float32",
     "nans": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal values with standard deviation 2; min: normal around -1 and max: normal around 1, both
    with standard deviation 0.5, so some bounds cross (outliers: 0.1% of every operand's normals
    scaled by 10); a nans case sets 2% of x to NaN."""
    g = torch.Generator(device).manual_seed(seed)
    zs = operands(g, case)
    x = 2 * zs[0]
    lo = -1 + 0.5 * zs[1]
    hi = 1 + 0.5 * zs[2]
    if case.get("nans"):  # 2% NaN in x
        x = sprinkle(g, x, 0.02, float("nan"))
    return finish_operands((x, lo, hi), case, device), {}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 2)
