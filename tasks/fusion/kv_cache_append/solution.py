"""Triton paged KV-cache write: a grid of (token block, feature block) programs; each reads its
tokens' slots once and copies key and value rows (read through their token/head strides) into
the caches. Padding tokens (slot -1) are masked out of the stores."""
import torch
import triton
import triton.language as tl


@triton.jit
def _kv_cache_append_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, T, HD, D,
                            skt, skh, svt, svh, BLOCK_T: tl.constexpr, BLOCK_F: tl.constexpr):
    toks = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    feats = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    tmask = toks < T
    slot = tl.load(slot_ptr + toks, mask=tmask, other=-1)
    fmask = feats < HD
    hi = feats // D
    di = feats % D
    ld_mask = tmask[:, None] & fmask[None, :]
    st_mask = (slot >= 0)[:, None] & fmask[None, :]
    kv = tl.load(k_ptr + toks[:, None] * skt + (hi * skh + di)[None, :], mask=ld_mask)
    vv = tl.load(v_ptr + toks[:, None] * svt + (hi * svh + di)[None, :], mask=ld_mask)
    dst = slot[:, None] * HD + feats[None, :]
    tl.store(kc_ptr + dst, kv, mask=st_mask)
    tl.store(vc_ptr + dst, vv, mask=st_mask)


def kv_cache_append(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                    value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    t, hk, d = key.shape
    if t == 0:
        return None
    if key.stride(2) != 1:
        key = key.contiguous()
    if value.stride(2) != 1:
        value = value.contiguous()
    slot_mapping = slot_mapping.contiguous()
    hd = hk * d
    block_f = min(triton.next_power_of_2(hd), 1024)
    block_t = min(triton.next_power_of_2(t), max(1, 4096 // block_f))
    grid = (triton.cdiv(t, block_t), triton.cdiv(hd, block_f))
    _kv_cache_append_kernel[grid](key, value, key_cache, value_cache, slot_mapping, t, hd, d,
                                  key.stride(0), key.stride(1), value.stride(0), value.stride(1),
                                  BLOCK_T=block_t, BLOCK_F=block_f, num_warps=4)
    return None
