"""Rotary position embedding, "rotate-half" (GPT-NeoX / vLLM neox) style, on queries and keys with
a position-indexed cos/sin cache and partial rotary dimension.

Implement `rope_half(q, k, cos, sin, positions)` returning `(q_out, k_out)`:

- `q` has shape `[T, Hq, D]` and `k` has shape `[T, Hk, D]` (T tokens, any number of heads each),
  same dtype (float32, float16 or bfloat16), on the GPU. Their last dimension is contiguous, but
  they may be views into one fused `[T, (Hq + 2 * Hk) * D]` QKV buffer (token rows further apart).
- `cos` and `sin` are float32 tables of shape `[P, R // 2]` (P >= max position + 1); R = 2 *
  cos.shape[1] is the rotary dimension, R <= D and even. Only the first R features of each head
  are rotated; features R..D-1 are copied unchanged.
- `positions` is an int64 tensor of shape `[T]`: the position of each token (arbitrary order).

For every token t with p = positions[t], every head, and i < R // 2 (float32 math, rounded once):

    x1, x2 = x[i], x[i + R // 2]
    out[i]          = x1 * cos[p, i] - x2 * sin[p, i]
    out[i + R // 2] = x2 * cos[p, i] + x1 * sin[p, i]
    out[j] = x[j]   for R <= j < D

Return two new contiguous tensors with the shapes and dtype of q and k. Inputs must not be
modified. Both are compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def rope_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    half = cos.shape[-1]
    c = cos[positions][:, None, :]
    s = sin[positions][:, None, :]

    def rotate(x):
        xf = x.float()
        x1, x2, rest = xf[..., :half], xf[..., half:2 * half], xf[..., 2 * half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1).to(x.dtype)
    return rotate(q), rotate(k)


CASES = [
    {"name": "fp32_small", "small": True, "t": 6, "hq": 4, "hk": 2, "d": 16, "r": 16, "dtype": "float32"},
    {"name": "bf16_qkv_small", "small": True, "t": 5, "hq": 4, "hk": 1, "d": 64, "r": 64, "dtype": "bfloat16",
     "fused": True},
    {"name": "fp16_partial_small", "small": True, "t": 7, "hq": 2, "hk": 2, "d": 80, "r": 32, "dtype": "float16",
     "outliers": True},
    {"name": "t1_qkv_small", "small": True, "t": 1, "hq": 8, "hk": 8, "d": 32, "r": 32, "dtype": "float32",
     "fused": True},
    {"name": "programs_small", "small": True, "t": 20, "hq": 4, "hk": 2, "d": 64, "r": 64, "dtype": "float32"},
    {"name": "bf16_qkv_16384tok_32q8k_128", "small": False, "t": 16384, "hq": 32, "hk": 8, "d": 128, "r": 128,
     "dtype": "bfloat16", "fused": True},
    {"name": "fp16_8192tok_40q40k_128_outliers", "small": False, "t": 8192, "hq": 40, "hk": 40, "d": 128,
     "r": 128, "dtype": "float16", "outliers": True},
    {"name": "fp32_partial_8192tok_32q32k_80r32", "small": False, "t": 8192, "hq": 32, "hk": 32, "d": 80, "r": 32,
     "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): D and the rotary dimension R stay even.
SHAPES = family(multiple={"d": 2, "r": 2})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k: standard normal (outliers: 0.1% scaled by 10). cos/sin: the standard RoPE table for
    base 10000 over P = T + 37 positions; positions: a random permutation of offsets into the
    table (so they are not simply 0..T-1). With `fused`, q and k are views into a contiguous
    [T, (Hq + 2Hk) * D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    t, hq, hk, d, r = case["t"], case["hq"], case["hk"], case["d"], case["r"]
    h = hq + 2 * hk
    qkv = normal(g, [t, h, d], case.get("outliers"))
    p = t + 37
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, r, 2, dtype=torch.float64, device=device) / r))
    ang = torch.arange(p, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    cos, sin = ang.cos().float(), ang.sin().float()
    positions = torch.randperm(p, generator=g, device=g.device)[:t]
    dtype = getattr(torch, case["dtype"])
    qkv = qkv.to(dtype).to(device)
    if case.get("fused"):
        flat = qkv.reshape(t, h * d)
        q = flat[:, :hq * d].view(t, hq, d)
        k = flat[:, hq * d:(hq + hk) * d].view(t, hk, d)
    else:
        q, k = qkv[:, :hq].contiguous(), qkv[:, hq:hq + hk].contiguous()
    return (q, k, cos.to(device), sin.to(device), positions.to(device)), {}


def cost(case: dict) -> dict:
    t, hq, hk, d, r = case["t"], case["hq"], case["hk"], case["d"], case["r"]
    n = t * (hq + hk) * d
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * t * (hq + hk) * r, "bytes": 2 * n * size + 8 * t + 4 * t * r}
