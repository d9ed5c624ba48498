"""Causal attention with the rotary embedding applied inside the kernel: q and k arrive
un-rotated, and the rotate-half RoPE is applied to each tile as it is loaded (no rotated copies of
q and k are written to memory).

Implement `rope_causal_attention(q, k, v, cos, sin)` for `q`, `k`, `v` `[B, S, H, D]` (flash-attn
layout, D even) and float32 tables `cos`, `sin` `[S, D // 2]` (the angles of positions 0..S-1),
returning a new tensor `[B, S, H, D]`:

    rope(x)[s, i]       = x[s, i] * cos[s, i] - x[s, i + D/2] * sin[s, i]          for i < D / 2
    rope(x)[s, i + D/2] = x[s, i + D/2] * cos[s, i] + x[s, i] * sin[s, i]
    qr, kr = rope(q), rope(k)          # float32 math, rounded to the input dtype (as the reference)
    out = causal softmax(qr kr^T / sqrt(D)) v                                     # per (b, h)

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided, e.g. views into a packed [B, S, 3, H, D] QKV
  buffer). S is arbitrary; D <= 256.
- Inputs must not be modified.

The result is compared with the reference below (RoPE in float32 rounded to the dtype, then
causal SDPA) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 5
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def rope_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                          sin: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    half = cos.shape[-1]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]

    def rope(x):
        xf = x.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)
    out = torch.nn.functional.scaled_dot_product_attention(
        rope(q).transpose(1, 2), rope(k).transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "s": 32, "h": 2, "d": 16, "dtype": "float16"},
    {"name": "packed_odd_small", "small": True, "b": 2, "s": 19, "h": 1, "d": 32, "dtype": "float16",
     "packed": True},
    {"name": "outliers_small", "small": True, "b": 1, "s": 12, "h": 2, "d": 64, "dtype": "float16",
     "outliers": True},
    {"name": "bf16_4x4096x32x128", "small": False, "b": 4, "s": 4096, "h": 32, "d": 128, "dtype": "bfloat16"},
    {"name": "fp16_packed_8x2048x16x128", "small": False, "b": 8, "s": 2048, "h": 16, "d": 128,
     "dtype": "float16", "packed": True},
    {"name": "fp16_2x3000x32x64_outliers", "small": False, "b": 2, "s": 3000, "h": 32, "d": 64,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D stays even (rotated in halves) and <= 256.
SHAPES = family(multiple={"d": 2}, most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10); cos/sin: standard RoPE
    tables (base 10000) for positions 0..S-1. With `packed`, q, k, v are views into a contiguous
    [B, S, 3, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, h, d = case["b"], case["s"], case["h"], case["d"]
    qkv = torch.randn(b, s, 3, h, d, generator=g, device=g.device)
    if case.get("outliers"):
        qkv[:, :, :2] = torch.where(torch.rand(b, s, 2, h, d, generator=g, device=g.device) < 0.001, qkv[:, :, :2] * 10,
                                    qkv[:, :, :2])
    qkv = qkv.to(getattr(torch, case["dtype"])).to(device)
    if case.get("packed"):
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    else:
        q, k, v = (qkv[:, :, i].contiguous() for i in range(3))
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
    ang = torch.arange(s, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    return (q, k, v, ang.cos().float().to(device), ang.sin().float().to(device)), {}


def cost(case: dict) -> dict:
    b, s, h, d = case["b"], case["s"], case["h"], case["d"]
    return {"flops": 2 * b * h * s * s * d + 6 * b * s * h * d, "bytes": 2 * 4 * b * s * h * d + 4 * s * d}
