"""Linear layer with fused bias and exact-GELU epilogue (a transformer MLP's first projection):
`gelu(x @ weight.T + bias)`.

Implement `matmul_bias_gelu(x, weight, bias)` for activations `x` of shape `[..., K]` (any number
of leading dimensions), a weight in PyTorch's linear layout `[N, K]` and a bias `[N]`, returning a
new tensor `[..., N]`:

    h   = sum over k of x[..., k] * weight[n, k] + bias[n]        # float32 accumulation
    out = 0.5 * h * (1 + erf(h / sqrt(2)))                        # exact GELU, rounded once

- All inputs share a dtype, float16 or bfloat16, on the GPU; `x` and `weight` are contiguous.
  The number of rows M (product of the leading dimensions), N and K are arbitrary (M may be 1).
- Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linear, which rounds
the matmul result before the GELU) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16,
which absorbs the different accumulation orders and the reference's intermediate rounding.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def matmul_bias_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (half-precision linear + exact GELU)."""
    return torch.nn.functional.gelu(torch.nn.functional.linear(x, weight, bias))


CASES = [
    {"name": "square_small", "small": True, "lead": [32], "n": 32, "k": 32, "dtype": "float16"},
    {"name": "3d_odd_small", "small": True, "lead": [2, 9], "n": 40, "k": 27, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "lead": [1], "n": 48, "k": 32, "dtype": "float16",
     "outliers": True},
    {"name": "tiles_small", "small": True, "lead": [136], "n": 140, "k": 100, "dtype": "float16"},
    {"name": "fp16_4x1024x4096_to_16384", "small": False, "lead": [4, 1024], "n": 16384, "k": 4096,
     "dtype": "float16"},
    {"name": "bf16_8192x3072_to_768", "small": False, "lead": [8192], "n": 3072, "k": 768, "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x5120_to_4100_outliers", "small": False, "lead": [3000], "n": 4100, "k": 5120,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); weight: normal / sqrt(K); bias: 0.5 *
    normal."""
    g = torch.Generator(device).manual_seed(seed)
    lead, n, k = case["lead"], case["n"], case["k"]
    x = normal(g, lead + [k], case.get("outliers"))
    w = torch.randn(n, k, generator=g, device=g.device) / k ** 0.5
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, w, bias)), {}


def cost(case: dict) -> dict:
    m = 1
    for s in case["lead"]:
        m *= s
    n, k = case["n"], case["k"]
    return {"flops": 2 * m * n * k + 10 * m * n, "bytes": 2 * (m * k + n * k + n + m * n)}
