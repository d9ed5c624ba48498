"""Write new keys and values into a paged KV cache, in place (vLLM's `reshape_and_cache`).

Implement `kv_cache_append(key, value, key_cache, value_cache, slot_mapping)`, which returns None
and writes, for every token t with `slot = slot_mapping[t] >= 0`:

    blk, off = slot // block_size, slot % block_size
    key_cache[blk, off, :, :]   = key[t, :, :]
    value_cache[blk, off, :, :] = value[t, :, :]

Tokens with `slot_mapping[t] == -1` (padding) are skipped. Every other cache entry keeps its
previous contents.

- `key` and `value` have shape `[T, Hk, D]`; their last dimension is contiguous, but they may be
  views into a fused QKV buffer (token rows further apart than Hk * D, heads D apart).
- `key_cache` and `value_cache` are contiguous with shape `[num_blocks, block_size, Hk, D]` and the
  dtype of key/value (float32, float16 or bfloat16). `slot_mapping` is an int64 tensor `[T]`; the
  valid slots are distinct.
- `key` and `value` must not be modified. The final states of both caches are compared with the
  reference below (an exact copy is expected; the dtype's default tolerance applies).
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3
MUTATES = ("key_cache", "value_cache")


def kv_cache_append(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                    value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """PyTorch reference (index_copy into the flattened slot dimension)."""
    nb, bs, hk, d = key_cache.shape
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    key_cache.view(nb * bs, hk, d)[slots] = key[valid]
    value_cache.view(nb * bs, hk, d)[slots] = value[valid]


CASES = [
    {"name": "fp32_small", "small": True, "t": 6, "hk": 2, "d": 16, "blocks": 4, "block_size": 4,
     "dtype": "float32"},
    {"name": "bf16_qkv_small", "small": True, "t": 9, "hk": 1, "d": 64, "blocks": 3, "block_size": 8,
     "dtype": "bfloat16", "fused": True},
    {"name": "fp16_padding_small", "small": True, "t": 12, "hk": 4, "d": 24, "blocks": 5, "block_size": 4,
     "dtype": "float16", "padding": 0.25},
    {"name": "t1_small", "small": True, "t": 1, "hk": 8, "d": 32, "blocks": 2, "block_size": 16,
     "dtype": "float32"},
    {"name": "programs_small", "small": True, "t": 3, "hk": 9, "d": 128, "blocks": 2, "block_size": 4,
     "dtype": "float32"},
    {"name": "d1_small", "small": True, "t": 5, "hk": 1, "d": 1, "blocks": 2, "block_size": 4, "dtype": "float32"},
    {"name": "bf16_qkv_16384tok_8h_128", "small": False, "t": 16384, "hk": 8, "d": 128, "blocks": 2048,
     "block_size": 16, "dtype": "bfloat16", "fused": True, "padding": 0.05},
    {"name": "fp16_8192tok_32h_128", "small": False, "t": 8192, "hk": 32, "d": 128, "blocks": 1024,
     "block_size": 16, "dtype": "float16"},
    {"name": "fp32_4096tok_16h_80_padding", "small": False, "t": 4096, "hk": 16, "d": 80, "blocks": 600,
     "block_size": 32, "dtype": "float32", "padding": 0.1},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """key, value, and both caches: standard normal. slot_mapping: distinct random slots, with a
    fraction `padding` of tokens set to -1. With `fused`, key and value are views into a
    contiguous [T, 3 * Hk * D] tensor (as from a QKV projection with as many query heads)."""
    g = torch.Generator(device).manual_seed(seed)
    t, hk, d, nb, bs = case["t"], case["hk"], case["d"], case["blocks"], case["block_size"]
    dtype = getattr(torch, case["dtype"])
    qkv = torch.randn(t, 3, hk, d, generator=g, device=g.device).to(dtype).to(device)
    if case.get("fused"):
        flat = qkv.view(t, 3 * hk * d)
        key = flat[:, hk * d:2 * hk * d].view(t, hk, d)
        value = flat[:, 2 * hk * d:].view(t, hk, d)
    else:
        key, value = qkv[:, 1].contiguous(), qkv[:, 2].contiguous()
    key_cache = torch.randn(nb, bs, hk, d, generator=g, device=g.device).to(dtype).to(device)
    value_cache = torch.randn(nb, bs, hk, d, generator=g, device=g.device).to(dtype).to(device)
    slots = torch.randperm(nb * bs, generator=g, device=g.device)[:t]
    if case.get("padding"):
        slots = torch.where(torch.rand(t, generator=g, device=g.device) < case["padding"], -1, slots)
    return (key, value, key_cache, value_cache, slots.to(device)), {}


def cost(case: dict) -> dict:
    n = case["t"] * case["hk"] * case["d"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: a padded token (slot -1) is neither read nor written, and any share may be drawn
    valid = 0 if case.get("padding") else n
    return {"flops": 0, "bytes": 4 * n * size + 8 * case["t"], "min_bytes": 4 * valid * size + 8 * case["t"]}
