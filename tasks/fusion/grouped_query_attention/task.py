"""Grouped-query attention for a prefill chunk against a longer context (LLaMA-2/3, Mistral
style; flash-attn's [B, S, H, D] layout), without materializing the attention matrix or
repeating K and V.

Implement `grouped_query_attention(q, k, v)` for `q` `[B, Sq, Hq, D]` and `k`, `v`
`[B, Sk, Hkv, D]` with Hq a multiple of Hkv and Sq <= Sk, returning a new tensor `[B, Sq, Hq, D]`.
Query head h uses key/value head `h // (Hq // Hkv)`. The queries are the last Sq positions of the
Sk-long sequence (bottom-right aligned causal mask), so query i attends to key j iff
`j <= i + (Sk - Sq)`. With `scale = 1 / sqrt(D)`:

    s[b, i, h, j]   = sum over d of q[b, i, h, d] * k[b, j, h // G, d] * scale    (masked: -inf)
    out[b, i, h, :] = sum over j of softmax(s[b, i, h, :])[j] * v[b, j, h // G, :]

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). Sq, Sk and D are arbitrary (D <= 256).
- Do not repeat K and V per query head. The output is rounded to the dtype. Inputs must not be
  modified.

The result is compared with the reference below (SDPA on repeated heads with an explicit mask)
using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    sq, hq = q.shape[1], q.shape[2]
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(g, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(g, dim=1)
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(diagonal=sk - sq)
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed)
    return out.transpose(1, 2)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "sq": 16, "sk": 16, "hq": 2, "hkv": 1, "d": 16,
     "dtype": "float16"},
    {"name": "chunk_small", "small": True, "b": 1, "sq": 10, "sk": 37, "hq": 2, "hkv": 1, "d": 32,
     "dtype": "float16"},
    {"name": "decode_sq1_outliers_small", "small": True, "b": 1, "sq": 1, "sk": 24, "hq": 2, "hkv": 1, "d": 64,
     "dtype": "float16", "outliers": True},
    {"name": "blocks_small", "small": True, "b": 1, "sq": 150, "sk": 150, "hq": 2, "hkv": 1, "d": 16,
     "dtype": "float16"},
    {"name": "bf16_llama3_4x4096_32q8kv_128", "small": False, "b": 4, "sq": 4096, "sk": 4096, "hq": 32, "hkv": 8,
     "d": 128, "dtype": "bfloat16"},
    {"name": "fp16_chunked_prefill_8x1024of5000_32q8kv_128", "small": False, "b": 8, "sq": 1024, "sk": 5000,
     "hq": 32, "hkv": 8, "d": 128, "dtype": "float16"},
    {"name": "fp16_16x2048_40q8kv_64_outliers", "small": False, "b": 16, "sq": 2048, "sk": 2048, "hq": 40,
     "hkv": 8, "d": 64, "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): Hq stays a multiple of Hkv (held); D <= 256; Sq <= Sk.
SHAPES = family(hold=("hkv",), multiple={"hq": "hkv"}, most={"d": 256}, order=(("sq", "sk"),))


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10), contiguous [B, S, H, D]."""
    g = torch.Generator(device).manual_seed(seed)
    b, sq, sk, hq, hkv, d = case["b"], case["sq"], case["sk"], case["hq"], case["hkv"], case["d"]
    dtype = getattr(torch, case["dtype"])
    out = []
    for i, shape in enumerate(([b, sq, hq, d], [b, sk, hkv, d], [b, sk, hkv, d])):
        t = torch.randn(shape, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, t * 10, t)
        out.append(t.to(dtype).to(device))
    return tuple(out), {}


def cost(case: dict) -> dict:
    b, sq, sk, hq, hkv, d = case["b"], case["sq"], case["sk"], case["hq"], case["hkv"], case["d"]
    visible = sq * (sk - sq) + sq * (sq + 1) // 2
    return {"flops": 4 * b * hq * visible * d, "bytes": 2 * b * d * (2 * sq * hq + 2 * sk * hkv)}
