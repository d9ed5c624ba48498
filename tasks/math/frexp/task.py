"""Elementwise decomposition into mantissa and binary exponent.

Implement `frexp(x)`: return `(mantissa, exponent)`, two new tensors shaped like `x`, with

    x = mantissa * 2 ** exponent,   0.5 <= |mantissa| < 1   (mantissa = exponent = 0 for x = 0)

- `x` is a float32, float16 or bfloat16 tensor of any shape on the GPU. It may be non-contiguous
  (a transposed 2-D view, or a strided slice such as `t[..., ::2]`); the result is a new
  contiguous tensor.
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- `mantissa` has the dtype of `x`, `exponent` the dtype torch.int32. Both are exact (every
  float16/bfloat16 value is exact in float32; the exponent is compared exactly).
- Subnormal inputs must be handled exactly: their exponent is below the minimum normal exponent
  (e.g. frexp(2**-140) = (0.5, -139) in float32, frexp(2**-20) = (0.5, -19) in float16). Zeros
  give (0, 0) with the sign of the zero kept in the mantissa. Inputs are finite (no inf or NaN).
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.frexp(x)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Math"
LEVEL = 3


def frexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference."""
    return tuple(torch.frexp(x))


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 1001], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [4097], "dtype": "bfloat16"},
    {"name": "size1_small", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [33, 65], "dtype": "float32", "view": "t"},
    {"name": "strided_3d_small", "small": True, "shape": [3, 7, 50], "dtype": "float16", "view": "s"},
    {"name": "outliers_small", "small": True, "shape": [4001], "dtype": "float32", "outliers": True},
    {"name": "subnormal_small", "small": True, "shape": [2001], "dtype": "float32", "exp_range": [-140, -120]},
    {"name": "fp16_subnormal_small", "small": True, "shape": [40, 50], "dtype": "float16",
     "exp_range": [-26, -12]},
    {"name": "zeros_small", "small": True, "shape": [1001], "dtype": "float32", "zeros": True},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "fp16_16M_outliers", "small": False, "shape": [4096, 4096], "dtype": "float16", "outliers": True},
    {"name": "bf16_16M", "small": False, "shape": [16777216], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shape": [4000, 4200], "dtype": "float32", "view": "t"},
    {"name": "bf16_subnormal_zeros_16M", "small": False, "shape": [16777216], "dtype": "bfloat16",
     "exp_range": [-140, -120], "zeros": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values times 2**k, k uniform over an exponent range ([-30, 30]; float16 [-10,
    5]; subnormal cases [-140, -120] or, in float16, [-26, -12], so many inputs are subnormal)
    (outliers: 0.1% of the normals scaled by 10); a zeros case sets 5% to zero."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    lo, hi = case.get("exp_range", [-10, 5] if case["dtype"] == "float16" else [-30, 30])
    x = z * torch.exp2(torch.randint(lo, hi + 1, z.shape, generator=g, device=g.device).float())
    if case.get("zeros"):  # 5% exact zeros
        x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.05, 0.0, x)
    return (finish(x, case, device),), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * n, "bytes": 2 * n * size}
