"""Single-token decode attention against a KV cache with per-sequence lengths and grouped KV heads
(the generation step of LLaMA-style models; "flash-decoding").

Implement `decode_attention(q, k_cache, v_cache, cache_seqlens)` for the new tokens' queries `q`
`[B, Hq, D]`, caches `k_cache`, `v_cache` `[B, Hkv, Smax, D]` (Hq a multiple of Hkv; query head h
uses KV head `h // (Hq // Hkv)`) and an int32 tensor `cache_seqlens` `[B]` (1 <= len <= Smax: only
the first len cache positions of sequence b are valid). Return a new tensor `[B, Hq, D]` with
`scale = 1 / sqrt(D)`:

    s[b, h, j]   = sum over d of q[b, h, d] * k_cache[b, h // G, j, d] * scale     for j < len[b]
    out[b, h, :] = sum over j < len[b] of softmax(s[b, h, :])[j] * v_cache[b, h // G, j, :]

- All float tensors share a dtype, float16 or bfloat16, and are contiguous, on the GPU. D <= 256.
- With few sequences and heads but long caches, one program per (sequence, head) leaves the GPU
  mostly idle: split the cache length across programs and merge the partial softmax results.
  Never read cache positions at or beyond a sequence's length. The output is rounded to the
  dtype. Inputs must not be modified.

The result is compared with the float32 reference below using rtol = atol = 1e-2 for float16 and
2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
STRUCTURE = ("cache_seqlens",)  # each sequence's cache length: how far the split grid reaches
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     cache_seqlens: torch.Tensor) -> torch.Tensor:
    """PyTorch reference, in float32 (queries grouped per KV head, no K/V repetition)."""
    b, hq, d = q.shape
    hkv, smax = k_cache.shape[1], k_cache.shape[2]
    qg = q.float().view(b, hkv, hq // hkv, d)
    s = torch.einsum("bkgd,bksd->bkgs", qg, k_cache.float()) * d ** -0.5
    valid = torch.arange(smax, device=q.device)[None, :] < cache_seqlens[:, None]
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    out = torch.einsum("bkgs,bksd->bkgd", torch.softmax(s, dim=-1), v_cache.float())
    return out.reshape(b, hq, d).to(q.dtype)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "hq": 2, "hkv": 1, "smax": 40, "d": 16, "dtype": "float16"},
    {"name": "long_split_small", "small": True, "b": 1, "hq": 1, "hkv": 1, "smax": 300, "d": 16,
     "dtype": "float16"},
    {"name": "len1_outliers_small", "small": True, "b": 2, "hq": 1, "hkv": 1, "smax": 24, "d": 64,
     "dtype": "float16", "outliers": True, "force_len1": True},
    {"name": "bf16_llama3_16x32q8kv_8192x128", "small": False, "b": 16, "hq": 32, "hkv": 8, "smax": 8192,
     "d": 128, "dtype": "bfloat16"},
    {"name": "fp16_batch1_32q8kv_32768x128", "small": False, "b": 1, "hq": 32, "hkv": 8, "smax": 32768,
     "d": 128, "dtype": "float16"},
    {"name": "fp16_32x32q32kv_2048x128_outliers", "small": False, "b": 32, "hq": 32, "hkv": 32, "smax": 2048,
     "d": 128, "dtype": "float16", "outliers": True, "force_len1": True},
]

# Unseen cases (kbx_ray/unseen.py): Hq stays a multiple of Hkv (held); D <= 256.
SHAPES = family(hold=("hkv",), multiple={"hq": "hkv"}, most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, caches: standard normal (outliers: 0.1% of q and k_cache scaled by 10); cache_seqlens:
    uniform in [1, Smax] with sequence 0 at Smax (and, with `force_len1`, sequence 1 at 1)."""
    g = torch.Generator(device).manual_seed(seed)
    b, hq, hkv, smax, d = case["b"], case["hq"], case["hkv"], case["smax"], case["d"]
    dtype = getattr(torch, case["dtype"])
    q = torch.randn(b, hq, d, generator=g, device=g.device)
    kc = torch.randn(b, hkv, smax, d, generator=g, device=g.device)
    vc = torch.randn(b, hkv, smax, d, generator=g, device=g.device)
    if case.get("outliers"):
        q = torch.where(torch.rand(b, hq, d, generator=g, device=g.device) < 0.001, q * 10, q)
        kc = torch.where(torch.rand(b, hkv, smax, d, generator=g, device=g.device) < 0.001, kc * 10, kc)
    lens = torch.randint(1, smax + 1, (b,), generator=g, dtype=torch.int32, device=g.device)
    lens[0] = smax
    if case.get("force_len1"):
        lens[1] = 1
    return (q.to(dtype).to(device), kc.to(dtype).to(device), vc.to(dtype).to(device), lens.to(device)), {}


def _tokens(b: int, top: int, len1: bool) -> tuple[int, int]:
    """(expected, least) total of the drawn lengths: sequence 0 at `top`, sequence 1 at 1 with
    `len1`, the others uniform in [1, top]."""
    fixed, rest = top + int(len1), b - 1 - int(len1)
    return fixed + rest * (top + 1) // 2, fixed + rest


def cost(case: dict) -> dict:
    """Only the valid cache positions are read: the expected lengths, and (`min_bytes`,
    `min_flops`) the least any draw gives."""
    b, hq, hkv, smax, d = case["b"], case["hq"], case["hkv"], case["smax"], case["d"]
    mean, least = _tokens(b, smax, bool(case.get("force_len1")))
    return {"flops": 4 * hq * mean * d, "bytes": 2 * (2 * hkv * mean * d + 2 * b * hq * d) + 4 * b,
            "min_flops": 4 * hq * least * d, "min_bytes": 2 * (2 * hkv * least * d + 2 * b * hq * d) + 4 * b}
