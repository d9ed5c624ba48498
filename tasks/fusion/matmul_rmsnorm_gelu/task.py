"""Linear projection followed by RMSNorm over the output features and an exact GELU.

Implement `matmul_rmsnorm_gelu(x, weight, norm_weight, eps=1e-6)` for `x` `[M, K]`, a weight in
PyTorch's linear layout `[N, K]` and a norm weight `[N]`, returning a new tensor `[M, N]`:

    h[m, n]   = sum over k of x[m, k] * weight[n, k]            # float32 accumulation
    y[m, n]   = h[m, n] / sqrt(mean over n of h[m, :] ** 2 + eps) * norm_weight[n]
    out[m, n] = 0.5 * y * (1 + erf(y / sqrt(2)))                # exact GELU, rounded to the dtype

- All tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, N and K are
  arbitrary (M may be 1). The normalization runs over the whole output row (all N features), so
  it cannot be finished inside one output tile when N is large: design the reduction.
- h may be rounded once to the dtype before the normalization (the reference does). Inputs must
  not be modified.

The result is compared with the reference below (PyTorch's half-precision linear, RMSNorm and
GELU, with their intermediate roundings) using rtol = atol = 1e-2 for float16 and 2e-2 for
bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def matmul_rmsnorm_gelu(x: torch.Tensor, weight: torch.Tensor, norm_weight: torch.Tensor,
                        eps: float = 1e-6) -> torch.Tensor:
    """PyTorch reference (half-precision linear, RMSNorm, exact GELU)."""
    F = torch.nn.functional
    h = F.linear(x, weight)
    return F.gelu(F.rms_norm(h, (h.shape[-1],), norm_weight, eps))


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_wide_small", "small": True, "m": 9, "n": 300, "k": 24, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "n": 48, "k": 40, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "small_act_wide_small", "small": True, "m": 5, "n": 300, "k": 24, "dtype": "float16", "x_scale": 0.05},
    {"name": "fp16_4096x4096x4096", "small": False, "m": 4096, "n": 4096, "k": 4096, "dtype": "float16"},
    {"name": "bf16_8192x5120x2048", "small": False, "m": 8192, "n": 5120, "k": 2048, "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x4100x3000_outliers", "small": False, "m": 3000, "n": 4100, "k": 3000,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10), times `x_scale` if given (small
    activations); weight: normal / sqrt(K) scaled per output row by [0.5, 2); norm_weight: 1 + 0.2 *
    normal."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    x = x * case.get("x_scale", 1.0)
    w = torch.randn(n, k, generator=g, device=g.device) / k ** 0.5 * (0.5 + 1.5 * torch.rand(n, 1, generator=g, device=g.device))
    nw = 1 + 0.2 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return tuple(t.to(dtype).to(device) for t in (x, w, nw)), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k + 14 * m * n, "bytes": 2 * (m * k + n * k + n + m * n)}
