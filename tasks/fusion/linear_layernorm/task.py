"""Linear projection followed by LayerNorm over the output features (a post-norm projection, as in
the BERT/ViT pooler-style heads and adapters): `layer_norm(x @ weight.T + bias)`.

Implement `linear_layernorm(x, weight, bias, ln_weight, ln_bias, eps=1e-5)` for `x` `[M, K]`, a
weight in PyTorch's linear layout `[N, K]`, a bias `[N]` and LayerNorm parameters `[N]`, returning
a new tensor `[M, N]`:

    h[m, n]  = sum over k of x[m, k] * weight[n, k] + bias[n]       # float32 accumulation
    mean[m]  = mean over n of h[m, :]
    var[m]   = mean over n of (h[m, :] - mean[m]) ** 2               # biased variance
    out[m, n] = (h[m, n] - mean[m]) / sqrt(var[m] + eps) * ln_weight[n] + ln_bias[n]

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, N and K are
  arbitrary (M may be 1). The statistics span the whole output row (all N features), so they
  cannot be finished inside one output tile when N is large: design the reduction.
- h may be rounded once to the dtype before the normalization (the reference does); the result
  is rounded to the dtype. Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linear and LayerNorm,
with their intermediate roundings) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def linear_layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, ln_weight: torch.Tensor,
                     ln_bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference (half-precision linear, then LayerNorm)."""
    F = torch.nn.functional
    h = F.linear(x, weight, bias)
    return F.layer_norm(h, (h.shape[-1],), ln_weight, ln_bias, eps)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_wide_small", "small": True, "m": 9, "n": 300, "k": 24, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "n": 48, "k": 40, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "small_act_wide_small", "small": True, "m": 5, "n": 300, "k": 24, "dtype": "float16", "act_scale": 0.05},
    {"name": "fp16_8192x1024x4096", "small": False, "m": 8192, "n": 1024, "k": 4096, "dtype": "float16"},
    {"name": "bf16_4096x4096x4096", "small": False, "m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x4100x2000_outliers", "small": False, "m": 3000, "n": 4100, "k": 2000,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); weight: normal / sqrt(K); bias: 1 + 0.5 *
    normal (a nonzero row mean); ln_weight: 1 + 0.3 * normal; ln_bias: 0.3 * normal. `act_scale`, if
    given, multiplies x and bias (small activations)."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    w = torch.randn(n, k, generator=g, device=g.device) / k ** 0.5
    bias = 1 + 0.5 * torch.randn(n, generator=g, device=g.device)
    x, bias = x * case.get("act_scale", 1.0), bias * case.get("act_scale", 1.0)
    lw = 1 + 0.3 * torch.randn(n, generator=g, device=g.device)
    lb = 0.3 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, w, bias, lw, lb)), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k + 10 * m * n, "bytes": 2 * (m * k + n * k + 3 * n + m * n)}
