"""Batched matmul -> RMSNorm -> exact GELU -> dropout -> subtract (the KernelBench-X
"bmm + rmsnorm + gelu + dropout + sub" chain), with the dropout keep-mask given as an input so the
result is deterministic.

Implement `bmm_rmsnorm_gelu_dropout_sub(a, b, norm_weight, keep_mask, other, p, eps=1e-6)` for
`a` `[B, M, K]`, `b` `[B, K, N]`, a norm weight `[N]`, a bool `keep_mask` `[B, M, N]`, a tensor
`other` `[B, M, N]` and a Python float dropout probability `0 <= p < 1`, returning a new tensor
`[B, M, N]`:

    h[i, m, n]   = sum over k of a[i, m, k] * b[i, k, n]                # float32 accumulation
    y[i, m, n]   = h[i, m, n] / sqrt(mean over n of h[i, m, :] ** 2 + eps) * norm_weight[n]
    g            = 0.5 * y * (1 + erf(y / sqrt(2)))                     # exact GELU
    out          = (g / (1 - p) if keep_mask else 0) - other            # rounded to the dtype

- `a`, `b`, `norm_weight` and `other` share a dtype, float16 or bfloat16, on the GPU; `a`,
  `keep_mask` and `other` are contiguous; `b` may be non-contiguous (in particular the
  `.transpose(1, 2)` view of a contiguous [B, N, K] tensor). B, M, N and K are arbitrary. The
  normalization spans the whole output row (all N features).
- h may be rounded once to the dtype before the normalization (the reference does). Inputs must
  not be modified.

The result is compared with the reference below (PyTorch's half-precision ops, with their
intermediate roundings) using rtol = atol = 1e-2 for float16 and 3e-2 for bfloat16 (the bfloat16
reference rounds five intermediates to 8 significant bits).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


def bmm_rmsnorm_gelu_dropout_sub(a: torch.Tensor, b: torch.Tensor, norm_weight: torch.Tensor,
                                 keep_mask: torch.Tensor, other: torch.Tensor, p: float,
                                 eps: float = 1e-6) -> torch.Tensor:
    """PyTorch reference (half-precision ops; dropout with the given mask)."""
    F = torch.nn.functional
    h = torch.bmm(a, b)
    y = F.gelu(F.rms_norm(h, (h.shape[-1],), norm_weight, eps))
    y = torch.where(keep_mask, y / (1.0 - p), torch.zeros_like(y))
    return y - other


CASES = [
    {"name": "fp16_small", "small": True, "bt": 2, "m": 16, "n": 24, "k": 32, "p": 0.1, "dtype": "float16"},
    {"name": "b_transposed_small", "small": True, "bt": 3, "m": 5, "n": 40, "k": 16, "p": 0.3,
     "dtype": "float16", "b_transposed": True},
    {"name": "m1_p0_outliers_small", "small": True, "bt": 2, "m": 1, "n": 64, "k": 24, "p": 0.0,
     "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "bt": 2, "m": 136, "n": 140, "k": 100, "p": 0.2, "dtype": "float16"},
    {"name": "small_act_wide_small", "small": True, "bt": 1, "m": 5, "n": 300, "k": 24, "p": 0.2, "dtype": "float16",
     "a_scale": 0.05},
    {"name": "fp16_16x1024x1024x512", "small": False, "bt": 16, "m": 1024, "n": 1024, "k": 512, "p": 0.1,
     "dtype": "float16"},
    {"name": "bf16_8x2048x4096x1024_bt", "small": False, "bt": 8, "m": 2048, "n": 4096, "k": 1024, "p": 0.1,
     "dtype": "bfloat16", "b_transposed": True},
    {"name": "fp16_odd_12x1000x3000x700_outliers", "small": False, "bt": 12, "m": 1000, "n": 3000, "k": 700,
     "p": 0.2, "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """a: standard normal (outliers: 0.1% scaled by 10), times `a_scale` if given (small
    activations); b: normal / sqrt(K) with per-column scales in [0.5, 2); norm_weight: 1 + 0.2
    * normal; keep_mask: Bernoulli(1 - p); other: 0.5 * normal. With `b_transposed`, b is the
    `.transpose(1, 2)` view of a contiguous [B, N, K] tensor."""
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
    keep = torch.rand(bt, m, n, generator=g, device=g.device) >= case["p"]
    other = 0.5 * torch.randn(bt, m, n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    a, b, nw, other = (t.to(dtype).to(device) for t in (a, b, nw, other))
    if case.get("b_transposed"):
        b = b.transpose(1, 2)
    return (a, b, nw, keep.to(device), other, case["p"]), {}


def cost(case: dict) -> dict:
    bt, m, n, k = case["bt"], case["m"], case["n"], case["k"]
    return {"flops": bt * (2 * m * n * k + 17 * m * n),
            "bytes": 2 * (bt * (m * k + k * n + 2 * m * n) + n) + bt * m * n}
