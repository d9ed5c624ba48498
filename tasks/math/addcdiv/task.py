"""Fused elementwise input + value * tensor1 / tensor2 with broadcasting.

Implement `addcdiv(input, tensor1, tensor2, value)`: return a new tensor, elementwise over the broadcast operands,

    out = input + value * tensor1 / tensor2

- `input`, `tensor1` and `tensor2` are tensors of one dtype (float32, float16 or bfloat16) on the
  GPU whose shapes broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with
  [1, M]); the result has the broadcast shape and that dtype and is a new contiguous tensor.
  Operands may be non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `value` is a Python float (default 1.0). `tensor2` never holds zeros.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.addcdiv(input, tensor1, tensor2, value=value)`: shape and dtype
must match exactly, NaN and infinities must sit in the same places, and finite values must agree
within the default tolerance for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16
1e-2).
"""
import torch

from kbx_ray.taskkit import broadcast_cost, finish_operands, operands, signed_magnitudes

CATEGORY = "Math"
LEVEL = 2


def addcdiv(input: torch.Tensor, tensor1: torch.Tensor, tensor2: torch.Tensor, value: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.addcdiv(input, tensor1, tensor2, value=value)


CASES = [
    {"name": "fp32_same_shape_small", "small": True, "shapes": [[37, 101], [37, 101], [37, 101]],
     "dtype": "float32", "value": 1.0},
    {"name": "fp16_row_broadcast_small", "small": True, "shapes": [[33, 100], [100], [33, 1]],
     "dtype": "float16", "value": 0.5},
    {"name": "bf16_outer_small", "small": True, "shapes": [[40, 1], [1, 70], [1]], "dtype": "bfloat16",
     "value": -2.0},
    {"name": "fp32_3d_broadcast_small", "small": True, "shapes": [[4, 1, 50], [9, 1], [4, 9, 50]],
     "dtype": "float32", "value": 1.0},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [33, 65], [65]],
     "views": ["t", None, None], "dtype": "float32", "value": 0.1},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300], [5, 300]],
     "views": [None, "s", "t"], "dtype": "float16", "value": -1.0},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001], [4001]], "dtype": "float32",
     "outliers": True, "value": 1.0},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096], [4096, 4096]],
     "dtype": "float32", "value": 1.0},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096, 4096], [4096]],
     "dtype": "float16", "outliers": True, "value": 0.5},
    {"name": "bf16_broadcast_16M", "small": False, "shapes": [[4096, 1], [1, 4096], [4096, 4096]],
     "dtype": "bfloat16", "value": -0.25},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200], [4000, 4200]],
     "views": ["t", None, None], "dtype": "float32", "value": 1.0},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input and tensor1: standard normal values; tensor2: magnitudes uniform in [0.5, 2] with random
    signs (outliers: 0.1% of every operand's normals scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    a, b, z = operands(g, case)
    c = signed_magnitudes(g, z)  # |tensor2| in [0.5, 2]
    return finish_operands((a, b, c), case, device), {k: case[k] for k in ('value',) if k in case}


def cost(case: dict) -> dict:
    return broadcast_cost(case, 3)
