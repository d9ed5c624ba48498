"""Triton paged-attention decode, split-K, in two launches. (1) A grid of (sequence * query head,
split) programs: each covers a contiguous range of logical positions, translates every position
of a BLOCK_N tile through the block table (physical block, offset), gathers K/V rows of its KV
head, and keeps a float32 online softmax per lane (one query row: dot products as multiply + row
sums). It writes a partial (max, sum, acc). Splits past the sequence length write an empty
partial. (2) One program per (sequence, head) merges the partials. With one split, (1) writes the
normalized output directly."""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _to_out(v, dtype: tl.constexpr):
    """fp32 -> dtype, round-to-nearest-even (bf16 rounded on the bits: the CPU interpreter would
    truncate)."""
    if dtype == tl.bfloat16:
        u = v.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        v = u.to(tl.float32, bitcast=True)
    return v.to(dtype)


@triton.jit
def _paged_partial_kernel(q_ptr, kc_ptr, vc_ptr, bt_ptr, len_ptr, o_ptr, ws_acc, ws_ml, HQ, G, HKV, D, BS, MAXB,
                          CHUNK, qk_scale, NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (bh // HQ).to(tl.int64)
    hk = ((bh % HQ) // G).to(tl.int64)
    seq_len = tl.load(len_ptr + b)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    q = tl.load(q_ptr + bh.to(tl.int64) * D + offs_d, mask=dmask, other=0.0).to(tl.float32) * qk_scale
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, seq_len)
    m_i = tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_N,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)
        valid = pos < hi
        phys = tl.load(bt_ptr + b * MAXB + pos // BS, mask=valid, other=0).to(tl.int64)
        row = ((phys * BS + pos % BS) * HKV + hk) * D
        kv_mask = valid[:, None] & dmask[None, :]
        kt = tl.load(kc_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.where(valid, tl.sum(kt * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m_i, s)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe)
        vt = tl.load(vc_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        l_i = l_i * alpha + p
        acc = acc * alpha[:, None] + p[:, None] * vt
        m_i = m_new
    m = tl.max(m_i, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(m_i - m_safe)
    l = tl.sum(l_i * w, axis=0)
    a = tl.sum(acc * w[:, None], axis=0)
    if NUM_SPLITS == 1:
        out = a / tl.where(l == 0.0, 1.0, l)
        tl.store(o_ptr + bh.to(tl.int64) * D + offs_d, _to_out(out, o_ptr.dtype.element_ty), mask=dmask)
    else:
        idx = bh.to(tl.int64) * NUM_SPLITS + split
        tl.store(ws_acc + idx * BLOCK_D + offs_d, a)
        tl.store(ws_ml + idx * 2, m)
        tl.store(ws_ml + idx * 2 + 1, l)


@triton.jit
def _paged_merge_kernel(ws_acc, ws_ml, o_ptr, D, NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr,
                        BLOCK_D: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    sp = tl.arange(0, BLOCK_S)
    smask = sp < NUM_SPLITS
    offs_d = tl.arange(0, BLOCK_D)
    idx = bh * NUM_SPLITS + sp
    m = tl.load(ws_ml + idx * 2, mask=smask, other=float("-inf"))
    l = tl.load(ws_ml + idx * 2 + 1, mask=smask, other=0.0)
    a = tl.load(ws_acc + idx[:, None] * BLOCK_D + offs_d[None, :], mask=smask[:, None], other=0.0)
    mx = tl.max(m, axis=0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp2(m - mx))
    out = tl.sum(a * w[:, None], axis=0) / tl.sum(l * w, axis=0)
    tl.store(o_ptr + bh * D + offs_d, _to_out(out, o_ptr.dtype.element_ty), mask=offs_d < D)


def paged_attention_decode(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    b, hq, d = q.shape
    _, bs, hkv, _ = key_cache.shape
    maxb = block_tables.shape[1]
    out = torch.empty((b, hq, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    q, key_cache, value_cache = q.contiguous(), key_cache.contiguous(), value_cache.contiguous()
    tables, lens = block_tables.contiguous(), seq_lens.contiguous()
    max_len = maxb * bs
    block_d = max(16, triton.next_power_of_2(d))
    block_n = 64 if block_d <= 128 else 32
    splits = max(1, min(triton.cdiv(max_len, 256), triton.cdiv(528, b * hq), 64))
    chunk = triton.cdiv(triton.cdiv(max_len, splits), block_n) * block_n
    splits = triton.cdiv(max_len, chunk)
    ws_acc = torch.empty((b * hq, splits, block_d), dtype=torch.float32, device=q.device)
    ws_ml = torch.empty((b * hq, splits, 2), dtype=torch.float32, device=q.device)
    _paged_partial_kernel[(b * hq, splits)](q, key_cache, value_cache, tables, lens, out, ws_acc, ws_ml, hq,
                                            hq // hkv, hkv, d, bs, maxb, chunk, 1.4426950408889634 / math.sqrt(d),
                                            NUM_SPLITS=splits, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=4)
    if splits > 1:
        _paged_merge_kernel[(b * hq,)](ws_acc, ws_ml, out, d, NUM_SPLITS=splits,
                                       BLOCK_S=triton.next_power_of_2(splits), BLOCK_D=block_d, num_warps=4)
    return out
