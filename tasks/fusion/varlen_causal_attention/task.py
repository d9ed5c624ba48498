"""Variable-length (packed) causal attention, as in flash-attn's `flash_attn_varlen_func`: the
sequences of a batch are concatenated without padding and delimited by cumulative lengths.

Implement `varlen_causal_attention(q, k, v, cu_seqlens, max_seqlen)` for packed `q`, `k`, `v`
`[T, H, D]` (T = total tokens), an int32 tensor `cu_seqlens` `[B + 1]` (cu_seqlens[0] = 0,
strictly increasing, cu_seqlens[B] = T) and a Python int `max_seqlen` (the longest sequence),
returning a new tensor `[T, H, D]`. Sequence b owns tokens
`cu_seqlens[b] .. cu_seqlens[b+1] - 1`; a token attends causally to the tokens of its own sequence
only. With `scale = 1 / sqrt(D)` and local positions i, j within sequence b:

    s[i, j] = sum over d of q[start_b + i, h, d] * k[start_b + j, h, d] * scale   if j <= i, else -inf
    out[start_b + i, h, :] = sum over j of softmax(s[i, :])[j] * v[start_b + j, h, :]   # rounded

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU. Their last dimension is contiguous;
  they may be views into one packed `[T, 3, H, D]` QKV buffer. D <= 256; sequence lengths are
  arbitrary (some may be 1).
- Never read across sequence boundaries, and skip key blocks past the diagonal. Inputs must not
  be modified.

The result is compared with per-sequence `scaled_dot_product_attention(..., is_causal=True)` using
rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 5
STRUCTURE = ("cu_seqlens",)  # sequence bounds: the grid over sequences and their lengths
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def varlen_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                            max_seqlen: int) -> torch.Tensor:
    """PyTorch reference: one causal SDPA call per sequence."""
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (t[lo:hi].transpose(0, 1) for t in (q, k, v))       # [H, len, D]
        out[lo:hi] = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True).transpose(0, 1)
    return out


CASES = [
    {"name": "fp16_small", "small": True, "lens": [5, 16, 3], "h": 1, "d": 16, "dtype": "float16"},
    {"name": "packed_qkv_len1_small", "small": True, "lens": [1, 13, 1], "h": 1, "d": 32, "dtype": "float16",
     "packed": True},
    {"name": "outliers_small", "small": True, "lens": [12, 9], "h": 1, "d": 64, "dtype": "float16",
     "outliers": True},
    {"name": "blocks_small", "small": True, "lens": [150, 7], "h": 1, "d": 16, "dtype": "float16"},
    {"name": "random_lens_small", "small": True, "lens": "random", "b": 4, "max": 40, "h": 1, "d": 16,
     "dtype": "float16"},
    {"name": "fp16_16seq_upto4096_32h_128", "small": False, "lens": "random", "b": 16, "max": 4096, "h": 32,
     "d": 128, "dtype": "float16"},
    {"name": "bf16_64seq_upto1024_16h_64_packed", "small": False, "lens": "random", "b": 64, "max": 1024,
     "h": 16, "d": 64, "dtype": "bfloat16", "packed": True},
    {"name": "fp16_4seq_8192_1_3000_77_32h_128_outliers", "small": False, "lens": [8192, 1, 3000, 77], "h": 32,
     "d": 128, "dtype": "float16", "outliers": True},
]


def _lengths(case: dict, g: torch.Generator) -> list:
    if case["lens"] == "random":
        lens = torch.randint(1, case["max"] + 1, (case["b"],), generator=g, device=g.device)
        lens[0] = case["max"]
        return [int(x) for x in lens]
    return list(case["lens"])

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Lengths as listed (or uniform in [1, max] with the first at max); q, k, v: standard normal
    (outliers: 0.1% of q and k scaled by 10). With `packed`, q, k, v are views into one contiguous
    [T, 3, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    lens = _lengths(case, g)
    t, h, d = sum(lens), case["h"], case["d"]
    qkv = torch.randn(t, 3, h, d, generator=g, device=g.device)
    if case.get("outliers"):
        qkv[:, :2] = torch.where(torch.rand(t, 2, h, d, generator=g, device=g.device) < 0.001, qkv[:, :2] * 10, qkv[:, :2])
    qkv = qkv.to(getattr(torch, case["dtype"])).to(device)
    if case.get("packed"):
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    else:
        q, k, v = (qkv[:, i].contiguous() for i in range(3))
    cu = torch.zeros(len(lens) + 1, dtype=torch.int32, device=device)
    cu[1:] = torch.tensor(lens, dtype=torch.int32, device=device).cumsum(0)
    return (q, k, v, cu.to(device), max(lens)), {}


def cost(case: dict) -> dict:
    lens = _lengths(case, torch.Generator().manual_seed(0))
    h, d = case["h"], case["d"]
    pairs = sum(n * (n + 1) // 2 for n in lens)
    out = {"flops": 4 * h * d * pairs, "bytes": 2 * 4 * sum(lens) * h * d + 4 * (len(lens) + 1)}
    if case["lens"] == "random":  # the lengths of seed 0 above; any draw has at least these
        top, b = case["max"], case["b"]
        out["min_flops"] = 4 * h * d * (top * (top + 1) // 2 + b - 1)
        out["min_bytes"] = 2 * 4 * (top + b - 1) * h * d + 4 * (b + 1)
    return out
