"""Rotary embedding of queries and keys fused with the paged KV-cache write (the attention
prologue of a serving engine): the rotated keys and the values go straight into the cache.

Implement `rope_kv_cache_append(q, k, v, cos, sin, positions, key_cache, value_cache,
slot_mapping)`, which returns the rotated queries as a new tensor and writes the cache in place:

- `q` `[T, Hq, D]`, `k` and `v` `[T, Hk, D]` share a dtype (float32, float16 or bfloat16), on the
  GPU; their last dimension is contiguous but they may be views into one fused
  `[T, (Hq + 2 Hk) * D]` QKV buffer. `cos`, `sin` are float32 tables `[P, D // 2]`; `positions` is
  an int64 tensor `[T]`. D is even.
- `key_cache`, `value_cache` are contiguous `[num_blocks, block_size, Hk, D]` of the same dtype;
  `slot_mapping` is an int64 tensor `[T]` of distinct slots, or -1 for padding tokens (skipped).

Rotate-half RoPE of a head vector x at position p = positions[t] (float32 math, rounded once):

    rope(x)[i]         = x[i] * cos[p, i] - x[i + D/2] * sin[p, i]        for i < D / 2
    rope(x)[i + D / 2] = x[i + D/2] * cos[p, i] + x[i] * sin[p, i]

Then, for every token t: `q_out[t, h] = rope(q[t, h])` for all tokens, and if
`slot = slot_mapping[t] >= 0`: `key_cache[slot // bs, slot % bs, h] = rope(k[t, h])` and
`value_cache[slot // bs, slot % bs, h] = v[t, h]` (bs = block_size). Other cache entries keep their
contents. q, k, v must not be modified.

`q_out` and the final states of both caches are compared with the reference below using the
default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 4
MUTATES = ("key_cache", "value_cache")


def rope_kv_cache_append(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         positions: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         slot_mapping: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    half = cos.shape[-1]
    c = cos[positions][:, None, :]
    s = sin[positions][:, None, :]

    def rope(x):
        xf = x.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)
    nb, bs, hk, d = key_cache.shape
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    key_cache.view(nb * bs, hk, d)[slots] = rope(k)[valid]
    value_cache.view(nb * bs, hk, d)[slots] = v[valid]
    return rope(q)


CASES = [
    {"name": "fp32_small", "small": True, "t": 6, "hq": 4, "hk": 2, "d": 16, "blocks": 4, "block_size": 4,
     "dtype": "float32"},
    {"name": "bf16_qkv_padding_small", "small": True, "t": 9, "hq": 4, "hk": 1, "d": 64, "blocks": 3,
     "block_size": 8, "dtype": "bfloat16", "fused": True, "padding": 0.3},
    {"name": "fp16_outliers_small", "small": True, "t": 5, "hq": 2, "hk": 2, "d": 32, "blocks": 2,
     "block_size": 4, "dtype": "float16", "outliers": True},
    {"name": "programs_small", "small": True, "t": 20, "hq": 4, "hk": 2, "d": 64, "blocks": 4, "block_size": 8,
     "dtype": "float32"},
    {"name": "d80_small", "small": True, "t": 100, "hq": 2, "hk": 1, "d": 80, "blocks": 13, "block_size": 8, "dtype": "float32"},
    {"name": "bf16_qkv_16384tok_32q8k_128", "small": False, "t": 16384, "hq": 32, "hk": 8, "d": 128,
     "blocks": 2048, "block_size": 16, "dtype": "bfloat16", "fused": True, "padding": 0.05},
    {"name": "fp16_8192tok_32q32k_128_outliers", "small": False, "t": 8192, "hq": 32, "hk": 32, "d": 128,
     "blocks": 1024, "block_size": 16, "dtype": "float16", "outliers": True},
    {"name": "fp32_4096tok_16q4k_96_padding", "small": False, "t": 4096, "hq": 16, "hk": 4, "d": 96,
     "blocks": 300, "block_size": 32, "dtype": "float32", "padding": 0.1},
]

# Unseen cases (kbx_ray/unseen.py): D stays even (rotated in halves).
SHAPES = family(multiple={"d": 2})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v and both caches: standard normal (outliers: 0.1% of q, k, v scaled by 10); cos/sin:
    standard RoPE tables (base 10000) over T + 37 positions; positions: a random permutation of
    table rows; slot_mapping: distinct random slots with a fraction `padding` set to -1. With
    `fused`, q, k, v are views into a contiguous [T, (Hq + 2Hk) * D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    t, hq, hk, d, nb, bs = case["t"], case["hq"], case["hk"], case["d"], case["blocks"], case["block_size"]
    h = hq + 2 * hk
    dtype = getattr(torch, case["dtype"])
    qkv = normal(g, [t, h, d], case.get("outliers"))
    p = t + 37
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
    ang = torch.arange(p, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    positions = torch.randperm(p, generator=g, device=g.device)[:t]
    key_cache = torch.randn(nb, bs, hk, d, generator=g, device=g.device).to(dtype).to(device)
    value_cache = torch.randn(nb, bs, hk, d, generator=g, device=g.device).to(dtype).to(device)
    slots = torch.randperm(nb * bs, generator=g, device=g.device)[:t]
    if case.get("padding"):
        slots = torch.where(torch.rand(t, generator=g, device=g.device) < case["padding"], -1, slots)
    qkv = qkv.to(dtype).to(device)
    if case.get("fused"):
        flat = qkv.reshape(t, h * d)
        q = flat[:, :hq * d].view(t, hq, d)
        k = flat[:, hq * d:(hq + hk) * d].view(t, hk, d)
        v = flat[:, (hq + hk) * d:].view(t, hk, d)
    else:
        q, k, v = (qkv[:, a:b].contiguous() for a, b in ((0, hq), (hq, hq + hk), (hq + hk, h)))
    return (q, k, v, ang.cos().float().to(device), ang.sin().float().to(device), positions.to(device),
            key_cache, value_cache, slots.to(device)), {}


def cost(case: dict) -> dict:
    t, hq, hk, d = case["t"], case["hq"], case["hk"], case["d"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: a padded token's (slot -1) k and v are neither read nor written; any share may be drawn
    kv = 0 if case.get("padding") else 4 * t * hk * d * size
    return {"flops": 3 * t * (hq + hk) * d, "bytes": 2 * t * (hq + 2 * hk) * d * size + 16 * t + 4 * t * d,
            "min_bytes": 2 * t * hq * d * size + kv + 16 * t + 4 * t * d}
