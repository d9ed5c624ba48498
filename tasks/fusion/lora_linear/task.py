"""Linear layer with a LoRA adapter: `x @ W.T + bias + scaling * (x @ A.T) @ B.T`.

Implement `lora_linear(x, weight, bias, lora_a, lora_b, scaling)` for `x` `[M, K]`, a base weight
`[N, K]`, a bias `[N]`, the adapter's down projection `lora_a` `[R, K]` and up projection `lora_b`
`[N, R]` (rank R, typically 8-64), and a Python float `scaling` (alpha / R). Return a new tensor
`[M, N]`:

    t[m, r]   = sum over k of x[m, k] * lora_a[r, k]                     # float32 accumulation
    out[m, n] = sum over k of x[m, k] * weight[n, k] + bias[n]
                + scaling * sum over r of t[m, r] * lora_b[n, r]         # rounded once

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, N, K and R
  are arbitrary (M may be 1; R >= 1). The [M, R] intermediate may be kept in float32 or rounded to
  the dtype. Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linears, with their
intermediate roundings) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scaling: float) -> torch.Tensor:
    """PyTorch reference (PEFT's LoRA linear forward, without dropout)."""
    F = torch.nn.functional
    return F.linear(x, weight, bias) + F.linear(F.linear(x, lora_a), lora_b) * scaling


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "r": 8, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 11, "n": 40, "k": 24, "r": 5, "dtype": "float16"},
    {"name": "m1_rank1_outliers_small", "small": True, "m": 1, "n": 48, "k": 32, "r": 1, "dtype": "float16",
     "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "r": 8, "dtype": "float16"},
    {"name": "fp16_4096x4096x4096_r16", "small": False, "m": 4096, "n": 4096, "k": 4096, "r": 16,
     "dtype": "float16"},
    {"name": "bf16_8192x11008x4096_r64", "small": False, "m": 8192, "n": 11008, "k": 4096, "r": 64,
     "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x5000x2000_r8_outliers", "small": False, "m": 3000, "n": 5000, "k": 2000, "r": 8,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); weight: normal / sqrt(K); bias: 0.5 *
    normal; lora_a: normal / sqrt(K); lora_b: normal / sqrt(R); scaling = 16 / R * 0.5 (so the
    adapter contributes about as much as the base layer)."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k, r = case["m"], case["n"], case["k"], case["r"]
    x = normal(g, [m, k], case.get("outliers"))
    w = torch.randn(n, k, generator=g, device=g.device) / k ** 0.5
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    a = torch.randn(r, k, generator=g, device=g.device) / k ** 0.5
    b = torch.randn(n, r, generator=g, device=g.device) / r ** 0.5
    dtype = getattr(torch, case["dtype"])
    args = tuple(t.to(dtype).to(device) for t in (x, w, bias, a, b))
    return args + (8.0 / r,), {}


def cost(case: dict) -> dict:
    m, n, k, r = case["m"], case["n"], case["k"], case["r"]
    return {"flops": 2 * m * n * k + 2 * m * r * (k + n) + 2 * m * n,
            "bytes": 2 * (m * k + n * k + n + r * (k + n) + m * n)}
