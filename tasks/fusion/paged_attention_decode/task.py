"""Paged-attention decode (vLLM's PagedAttention): one new query token per sequence attends to
its KV cache, which lives in fixed-size physical blocks scattered through a shared pool and is
located through a per-sequence block table. Grouped KV heads.

Implement `paged_attention_decode(q, key_cache, value_cache, block_tables, seq_lens)`:

- `q` `[B, Hq, D]`; `key_cache`, `value_cache` `[num_blocks, block_size, Hkv, D]` (the layout
  written by `kv_cache_append`); all share a dtype, float16 or bfloat16, contiguous, on the GPU.
  Hq is a multiple of Hkv; query head h uses KV head `h // (Hq // Hkv)`. D <= 256.
- `block_tables` int32 `[B, max_blocks]`: logical block i of sequence b lives in physical block
  `block_tables[b, i]`; entries past a sequence's last block are arbitrary (never read them).
- `seq_lens` int32 `[B]`, 1 <= seq_lens[b] <= max_blocks * block_size.

Logical position j of sequence b is stored at
`cache[block_tables[b, j // block_size], j % block_size]`. With `scale = 1 / sqrt(D)`:

    s[b, h, j]   = sum over d of q[b, h, d] * K[b, j, h // G, d] * scale       for j < seq_lens[b]
    out[b, h, :] = sum over j of softmax(s[b, h, :])[j] * V[b, j, h // G, :]   # rounded to the dtype

Return a new tensor `[B, Hq, D]`. Long sequences with few (sequence, head) pairs need the sequence
split across programs (and the partial softmax results merged) to use the GPU. Inputs must not be
modified.

The result is compared with the float32 reference below using rtol = atol = 1e-2 for float16 and
2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 5
STRUCTURE = ("seq_lens", "block_tables")  # lengths: how many blocks the grid visits; the
# tables: which cache blocks each length reaches (drawn for those lengths, so kept with them)
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def paged_attention_decode(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    """PyTorch reference, in float32: gather each sequence's blocks, then masked attention."""
    b, hq, d = q.shape
    _, bs, hkv, _ = key_cache.shape
    maxb = block_tables.shape[1]
    tables = block_tables.long()
    k = key_cache[tables].reshape(b, maxb * bs, hkv, d).float()
    v = value_cache[tables].reshape(b, maxb * bs, hkv, d).float()
    qg = q.float().view(b, hkv, hq // hkv, d)
    s = torch.einsum("bkgd,bskd->bkgs", qg, k) * d ** -0.5
    valid = torch.arange(maxb * bs, device=q.device)[None, :] < seq_lens[:, None]
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    out = torch.einsum("bkgs,bskd->bkgd", torch.softmax(s, dim=-1), v)
    return out.reshape(b, hq, d).to(q.dtype)


CASES = [
    {"name": "fp16_small", "small": True, "b": 2, "hq": 2, "hkv": 1, "d": 16, "block_size": 4, "max_len": 30,
     "dtype": "float16"},
    {"name": "long_split_small", "small": True, "b": 1, "hq": 1, "hkv": 1, "d": 32, "block_size": 16,
     "max_len": 300, "dtype": "float16"},
    {"name": "len1_outliers_small", "small": True, "b": 2, "hq": 2, "hkv": 2, "d": 64, "block_size": 8,
     "max_len": 20, "dtype": "float16", "outliers": True, "force_len1": True},
    {"name": "bf16_32seq_32q8kv_128_bs16_4096", "small": False, "b": 32, "hq": 32, "hkv": 8, "d": 128,
     "block_size": 16, "max_len": 4096, "dtype": "bfloat16"},
    {"name": "fp16_1seq_64q8kv_128_bs16_32768", "small": False, "b": 1, "hq": 64, "hkv": 8, "d": 128,
     "block_size": 16, "max_len": 32768, "dtype": "float16"},
    {"name": "fp16_128seq_32q32kv_128_bs32_1000_outliers", "small": False, "b": 128, "hq": 32, "hkv": 32,
     "d": 128, "block_size": 32, "max_len": 1000, "dtype": "float16", "outliers": True, "force_len1": True},
]

# Unseen cases (kbx_ray/unseen.py): Hq stays a multiple of Hkv (held); D <= 256.
SHAPES = family(hold=("hkv",), multiple={"hq": "hkv"}, most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """seq_lens: uniform in [1, max_len] with sequence 0 at max_len (and, with `force_len1`,
    sequence 1 at 1). Each sequence gets distinct physical blocks drawn from a shuffled pool with
    25% spare blocks; unused table entries point at block 0. q, caches: standard normal (outliers:
    0.1% of q and key_cache scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    b, hq, hkv, d, bs, max_len = case["b"], case["hq"], case["hkv"], case["d"], case["block_size"], case["max_len"]
    dtype = getattr(torch, case["dtype"])
    lens = torch.randint(1, max_len + 1, (b,), generator=g, dtype=torch.int32, device=g.device)
    lens[0] = max_len
    if case.get("force_len1"):
        lens[1] = 1
    maxb = (max_len + bs - 1) // bs
    need = [(int(n) + bs - 1) // bs for n in lens]
    num_blocks = sum(need) + max(1, sum(need) // 4)
    perm = torch.randperm(num_blocks, generator=g, device=g.device)
    tables = torch.zeros(b, maxb, dtype=torch.int32, device=device)
    at = 0
    for i, n in enumerate(need):
        tables[i, :n] = perm[at:at + n].to(torch.int32)
        at += n
    q = torch.randn(b, hq, d, generator=g, device=g.device)
    kc = torch.randn(num_blocks, bs, hkv, d, generator=g, device=g.device)
    vc = torch.randn(num_blocks, bs, hkv, d, generator=g, device=g.device)
    if case.get("outliers"):
        q = torch.where(torch.rand(b, hq, d, generator=g, device=g.device) < 0.001, q * 10, q)
        kc = torch.where(torch.rand(num_blocks, bs, hkv, d, generator=g, device=g.device) < 0.001, kc * 10, kc)
    return (q.to(dtype).to(device), kc.to(dtype).to(device), vc.to(dtype).to(device), tables.to(device),
            lens.to(device)), {}


def _tokens(b: int, top: int, len1: bool) -> tuple[int, int]:
    """(expected, least) total of the drawn lengths: sequence 0 at `top`, sequence 1 at 1 with
    `len1`, the others uniform in [1, top]."""
    fixed, rest = top + int(len1), b - 1 - int(len1)
    return fixed + rest * (top + 1) // 2, fixed + rest


def cost(case: dict) -> dict:
    """Only the valid tokens' cache entries and their block-table entries are read: the expected
    lengths, and (`min_bytes`, `min_flops`) the least any draw gives."""
    b, hq, hkv, d, max_len = case["b"], case["hq"], case["hkv"], case["d"], case["max_len"]
    bs, len1 = case["block_size"], bool(case.get("force_len1"))
    mean, least = _tokens(b, max_len, len1)
    blocks = -(-max_len // bs) + int(len1)  # table entries of sequences 0 (and 1)
    rest = b - 1 - int(len1)
    mean_blocks, least_blocks = blocks + rest * -(-((max_len + 1) // 2) // bs), blocks + rest
    return {"flops": 4 * hq * mean * d,
            "bytes": 2 * (2 * hkv * mean * d + 2 * b * hq * d) + 4 * b + 4 * mean_blocks,
            "min_flops": 4 * hq * least * d,
            "min_bytes": 2 * (2 * hkv * least * d + 2 * b * hq * d) + 4 * b + 4 * least_blocks}
