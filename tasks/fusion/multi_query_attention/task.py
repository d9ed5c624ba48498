"""Causal multi-query attention (one shared key/value head for all query heads, as in Falcon and
StarCoder), without materializing the attention matrix or expanding K and V.

Implement `multi_query_attention(q, k, v)` for `q` `[B, H, S, D]` and `k`, `v` `[B, 1, S, D]`,
returning a new tensor `[B, H, S, D]` with `scale = 1 / sqrt(D)`; query i attends to keys j <= i:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, 0, j, d] * scale     if j <= i, else -inf
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, 0, j, :]   # rounded to the dtype

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU. Their last dimension is
  contiguous; the other dimensions may be strided (for example k and v slices of a fused KV
  projection). S and D are arbitrary (D <= 256).
- Do not copy K and V per head: every query head must read the single shared head. Inputs must
  not be modified.

The result is compared with `scaled_dot_product_attention(q, k.expand(...), v.expand(...),
is_causal=True)` using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def multi_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (K and V expanded as views)."""
    b, h, s, d = q.shape
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.expand(b, h, s, d), v.expand(b, h, s, d), is_causal=True)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 4, "s": 16, "d": 16, "dtype": "float16"},
    {"name": "odd_fused_kv_small", "small": True, "b": 2, "h": 2, "s": 19, "d": 32, "dtype": "float16",
     "fused_kv": True},
    {"name": "d80_outliers_small", "small": True, "b": 1, "h": 3, "s": 12, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "blocks_small", "small": True, "b": 1, "h": 2, "s": 150, "d": 16, "dtype": "float16"},
    {"name": "fp16_falcon_4x71x2048x64", "small": False, "b": 4, "h": 71, "s": 2048, "d": 64, "dtype": "float16"},
    {"name": "bf16_starcoder_4x48x4096x128_fused_kv", "small": False, "b": 4, "h": 48, "s": 4096, "d": 128,
     "dtype": "bfloat16", "fused_kv": True},
    {"name": "fp16_8x32x1500x96_outliers", "small": False, "b": 8, "h": 32, "s": 1500, "d": 96,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10). With `fused_kv`, k and v
    are the two halves of the last dimension of a contiguous [B, 1, S, 2D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    dtype = getattr(torch, case["dtype"])
    q = torch.randn(b, h, s, d, generator=g, device=g.device)
    kv = torch.randn(b, 1, s, 2 * d, generator=g, device=g.device)
    if case.get("outliers"):
        q = torch.where(torch.rand(b, h, s, d, generator=g, device=g.device) < 0.001, q * 10, q)
        kv = torch.where(torch.rand(b, 1, s, 2 * d, generator=g, device=g.device) < 0.001, kv * 10, kv)
    q, kv = q.to(dtype).to(device), kv.to(dtype).to(device)
    if case.get("fused_kv"):
        k, v = kv[..., :d], kv[..., d:]
    else:
        k, v = kv[..., :d].contiguous(), kv[..., d:].contiguous()
    return (q, k, v), {}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    return {"flops": 2 * b * h * s * s * d, "bytes": 2 * (2 * b * h * s * d + 2 * b * s * d)}
