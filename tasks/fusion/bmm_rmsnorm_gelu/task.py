"""Batched matmul followed by RMSNorm over the output features and an exact GELU.

Implement `bmm_rmsnorm_gelu(a, b, norm_weight, eps=1e-6)` for `a` `[B, M, K]`, `b` `[B, K, N]` and
a norm weight `[N]`, returning a new tensor `[B, M, N]`:

    h[i, m, n]   = sum over k of a[i, m, k] * b[i, k, n]                # float32 accumulation
    y[i, m, n]   = h[i, m, n] / sqrt(mean over n of h[i, m, :] ** 2 + eps) * norm_weight[n]
    out[i, m, n] = 0.5 * y * (1 + erf(y / sqrt(2)))                     # rounded to the dtype

- All tensors share a dtype, float16 or bfloat16, on the GPU. `a` is contiguous; `b` may be
  non-contiguous (in particular the `.transpose(1, 2)` view of a contiguous [B, N, K] tensor). B,
  M, N and K are arbitrary. The normalization spans the whole output row (all N features).
- h may be rounded once to the dtype before the normalization (the reference does). Inputs must
  not be modified.

The result is compared with the reference below (PyTorch's half-precision bmm, RMSNorm and GELU,
with their intermediate roundings) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def bmm_rmsnorm_gelu(a: torch.Tensor, b: torch.Tensor, norm_weight: torch.Tensor,
                     eps: float = 1e-6) -> torch.Tensor:
    """PyTorch reference (half-precision bmm, RMSNorm, exact GELU)."""
    F = torch.nn.functional
    h = torch.bmm(a, b)
    return F.gelu(F.rms_norm(h, (h.shape[-1],), norm_weight, eps))


CASES = [
    {"name": "fp16_small", "small": True, "bt": 2, "m": 16, "n": 24, "k": 32, "dtype": "float16"},
    {"name": "b_transposed_small", "small": True, "bt": 3, "m": 5, "n": 40, "k": 16, "dtype": "float16",
     "b_transposed": True},
    {"name": "m1_outliers_small", "small": True, "bt": 2, "m": 1, "n": 64, "k": 24, "dtype": "float16",
     "outliers": True},
    {"name": "tiles_small", "small": True, "bt": 2, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "small_act_wide_small", "small": True, "bt": 1, "m": 5, "n": 300, "k": 24, "dtype": "float16",
     "a_scale": 0.05},
    {"name": "fp16_16x1024x1024x512", "small": False, "bt": 16, "m": 1024, "n": 1024, "k": 512,
     "dtype": "float16"},
    {"name": "bf16_8x2048x4096x1024_bt", "small": False, "bt": 8, "m": 2048, "n": 4096, "k": 1024,
     "dtype": "bfloat16", "b_transposed": True},
    {"name": "fp16_odd_12x1000x3000x700_outliers", "small": False, "bt": 12, "m": 1000, "n": 3000, "k": 700,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """a: standard normal (outliers: 0.1% scaled by 10), times `a_scale` if given (small
    activations); b: normal / sqrt(K) with per-column scales in [0.5, 2); norm_weight: 1 + 0.2
    * normal. With `b_transposed`, b is the `.transpose(1, 2)` view of a contiguous [B, N, K]
    tensor."""
    g = torch.Generator(device).manual_seed(seed)
    bt, m, n, k = case["bt"], case["m"], case["n"], case["k"]
    a = normal(g, [bt, m, k], case.get("outliers"))
    a = a * case.get("a_scale", 1.0)
    col_scale = 0.5 + 1.5 * torch.rand(n, generator=g, device=g.device)
    if case.get("b_transposed"):
        b = torch.randn(bt, n, k, generator=g, device=g.device) / k ** 0.5 * col_scale[None, :, None]
    else:
        b = torch.randn(bt, k, n, generator=g, device=g.device) / k ** 0.5 * col_scale
    nw = 1 + 0.2 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    a, b, nw = (t.to(dtype).to(device) for t in (a, b, nw))
    if case.get("b_transposed"):
        b = b.transpose(1, 2)
    return (a, b, nw), {}


def cost(case: dict) -> dict:
    bt, m, n, k = case["bt"], case["m"], case["n"], case["k"]
    return {"flops": bt * (2 * m * n * k + 14 * m * n), "bytes": 2 * (bt * (m * k + k * n + m * n) + n)}
