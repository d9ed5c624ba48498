"""GPT-2 style feed-forward block: `fc2(gelu_tanh(fc1(x)))`.

Implement `mlp_gelu(x, w1, b1, w2, b2)` for tokens `x` `[M, E]`, `w1` `[F, E]`, `b1` `[F]`, `w2`
`[E, F]`, `b2` `[E]` (PyTorch linear layouts), returning a new tensor `[M, E]`:

    h   = x @ w1.T + b1                                            # float32 accumulation
    a   = 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h**3)))   # tanh-GELU ("gelu_new")
    out = a @ w2.T + b2

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, E and F are
  arbitrary (M may be 1). The [M, F] activation may be materialized once in the input dtype (as
  the reference does), but the bias and GELU must be fused into the first GEMM's epilogue and the
  bias into the second's. Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linears and GELU, with
their intermediate roundings) using rtol = atol = 1e-2 for float16 and 5e-2 for bfloat16: the bfloat16
reference rounds three or four intermediates to 8 significant bits, and those errors add up over
the second GEMM (a float32 emulation of a single-rounding kernel differs from it by about 2.5e-2
at worst).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


def mlp_gelu(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
             b2: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (GPT-2 MLP in half precision)."""
    F = torch.nn.functional
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "e": 32, "f": 32, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 9, "e": 24, "f": 40, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "e": 32, "f": 48, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "e": 140, "f": 136, "dtype": "float16"},
    {"name": "fp16_gpt2_16384x768x3072", "small": False, "m": 16384, "e": 768, "f": 3072, "dtype": "float16"},
    {"name": "bf16_gpt2xl_8192x1600x6400", "small": False, "m": 8192, "e": 1600, "f": 6400, "dtype": "bfloat16"},
    {"name": "fp16_4100x2048x8192_outliers", "small": False, "m": 4100, "e": 2048, "f": 8192, "dtype": "float16",
     "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); w1: normal / sqrt(E); b1: 0.5 * normal;
    w2: 2 * normal / sqrt(F); b2: 0.5 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    m, e, f = case["m"], case["e"], case["f"]
    x = normal(g, [m, e], case.get("outliers"))
    w1 = torch.randn(f, e, generator=g, device=g.device) / e ** 0.5
    b1 = 0.5 * torch.randn(f, generator=g, device=g.device)
    w2 = 2 * torch.randn(e, f, generator=g, device=g.device) / f ** 0.5
    b2 = 0.5 * torch.randn(e, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, w1, b1, w2, b2)), {}


def cost(case: dict) -> dict:
    m, e, f = case["m"], case["e"], case["f"]
    # `bytes` counts the activation [M, F] written and read once (allowed); a fused kernel need not
    return {"flops": 4 * m * e * f + 12 * m * f, "bytes": 2 * (2 * m * e + 2 * e * f + e + f + 2 * m * f),
            "min_bytes": 2 * (2 * m * e + 2 * e * f + e + f)}
