"""Pre-norm linear: LayerNorm over the input features followed by a linear projection (the
`ln -> qkv` / `ln -> fc1` entry of every pre-norm transformer block):
`linear(layer_norm(x), weight, bias)`.

Implement `layernorm_linear(x, ln_weight, ln_bias, weight, bias, eps=1e-5)` for `x` `[M, K]`,
LayerNorm parameters `[K]`, a weight in PyTorch's linear layout `[N, K]` and a bias `[N]`,
returning a new tensor `[M, N]`:

    mean[m] = mean over k of x[m, :]
    var[m]  = mean over k of (x[m, :] - mean[m]) ** 2                  # biased variance
    xn[m, k] = (x[m, k] - mean[m]) / sqrt(var[m] + eps) * ln_weight[k] + ln_bias[k]
    out[m, n] = sum over k of xn[m, k] * weight[n, k] + bias[n]        # float32 accumulation

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, N and K are
  arbitrary (M may be 1). The normalized activations need not be written to memory: the point of
  the fusion is to normalize the x tiles as the GEMM loads them. xn may be rounded to the dtype
  before the multiplication (the reference does). Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision LayerNorm and linear,
with their intermediate roundings) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def layernorm_linear(x: torch.Tensor, ln_weight: torch.Tensor, ln_bias: torch.Tensor, weight: torch.Tensor,
                     bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference (half-precision LayerNorm, then linear)."""
    F = torch.nn.functional
    return F.linear(F.layer_norm(x, (x.shape[-1],), ln_weight, ln_bias, eps), weight, bias)


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 9, "n": 40, "k": 100, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "n": 48, "k": 64, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "long_k_small", "small": True, "m": 3, "n": 20, "k": 1100, "dtype": "float16"},
    {"name": "fp16_qkv_8192x12288x4096", "small": False, "m": 8192, "n": 12288, "k": 4096, "dtype": "float16"},
    {"name": "bf16_fc1_16384x3072x768", "small": False, "m": 16384, "n": 3072, "k": 768, "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x5000x2000_outliers", "small": False, "m": 3000, "n": 5000, "k": 2000,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets in [0, 2) and scales in [0.5, 2) (outliers: 0.1% scaled by
    10); ln_weight: 1 + 0.3 * normal; ln_bias: 0.3 * normal; weight: normal / sqrt(K); bias: 0.5 *
    normal."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(m, 1, generator=g, device=g.device)) + 2 * torch.rand(m, 1, generator=g, device=g.device)
    lw = 1 + 0.3 * torch.randn(k, generator=g, device=g.device)
    lb = 0.3 * torch.randn(k, generator=g, device=g.device)
    w = torch.randn(n, k, generator=g, device=g.device) / k ** 0.5
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, lw, lb, w, bias)), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k + 8 * m * k, "bytes": 2 * (m * k + 2 * k + n * k + n + m * n)}
