"""LLaMA-style gated feed-forward block (SwiGLU MLP): `down(silu(gate(x)) * up(x))`.

Implement `gated_mlp(x, w_gate, w_up, w_down)` for tokens `x` `[M, E]`, `w_gate` and `w_up`
`[F, E]` and `w_down` `[E, F]` (PyTorch linear layouts, no biases), returning a new tensor
`[M, E]`:

    g   = x @ w_gate.T,   u = x @ w_up.T                  # float32 accumulation
    h   = silu(g) * u = g / (1 + exp(-g)) * u
    out = h @ w_down.T

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, E and F are
  arbitrary (M may be 1, as in decoding). The [M, F] activation h may be materialized once in the
  input dtype, but g and u must not be written to memory: compute both in one pass over x and
  apply the gating in the epilogue. Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linears, with their
intermediate roundings) using rtol = atol = 1e-2 for float16 and 5e-2 for bfloat16: the bfloat16
reference rounds three or four intermediates to 8 significant bits, and those errors add up over
the second GEMM (a float32 emulation of a single-rounding kernel differs from it by about 2.5e-2
at worst).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


def gated_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (LlamaMLP in half precision)."""
    F = torch.nn.functional
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "e": 32, "f": 32, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 7, "e": 24, "f": 40, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "e": 32, "f": 48, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "e": 140, "f": 136, "dtype": "float16"},
    {"name": "bf16_llama7b_4096x4096x11008", "small": False, "m": 4096, "e": 4096, "f": 11008,
     "dtype": "bfloat16"},
    {"name": "fp16_2048x5120x13824_outliers", "small": False, "m": 2048, "e": 5120, "f": 13824,
     "dtype": "float16", "outliers": True},
    {"name": "fp16_decode_8x4096x14336", "small": False, "m": 8, "e": 4096, "f": 14336, "dtype": "float16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); w_gate, w_up: normal / sqrt(E); w_down:
    2 * normal / sqrt(F)."""
    g = torch.Generator(device).manual_seed(seed)
    m, e, f = case["m"], case["e"], case["f"]
    x = normal(g, [m, e], case.get("outliers"))
    w_gate = torch.randn(f, e, generator=g, device=g.device) / e ** 0.5
    w_up = torch.randn(f, e, generator=g, device=g.device) / e ** 0.5
    w_down = 2 * torch.randn(e, f, generator=g, device=g.device) / f ** 0.5
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, w_gate, w_up, w_down)), {}


def cost(case: dict) -> dict:
    m, e, f = case["m"], case["e"], case["f"]
    # `bytes` counts h [M, F] written and read once (allowed); a fully fused kernel need not
    return {"flops": 6 * m * e * f + 4 * m * f, "bytes": 2 * (2 * m * e + 3 * e * f + 2 * m * f),
            "min_bytes": 2 * (2 * m * e + 3 * e * f)}
