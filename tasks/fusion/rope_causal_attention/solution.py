"""Triton causal flash attention with in-kernel rotate-half RoPE: one program per (query block,
batch * head). The q tile is loaded together with its rotation partner (features i +- D/2),
rotated in float32 with its positions' cos/sin and rounded to the input dtype once; every key
tile is rotated the same way as it is loaded. Key blocks past the diagonal are skipped; online
softmax with exp2, float32 accumulators, P cast to the input dtype for the PV tl.dot."""
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
def _rope_rows(base, rows, stride_s, offs_d, D, S, cos_ptr, sin_ptr):
    """Load x[rows, :] (a [len(rows), BLOCK_D] tile) and return rope(x) rounded to x's dtype."""
    half = D // 2
    first = offs_d < half
    partner = tl.where(first, offs_d + half, offs_d - half)
    mask = (rows[:, None] < S) & (offs_d[None, :] < D)
    x = tl.load(base + rows[:, None] * stride_s + offs_d[None, :], mask=mask, other=0.0)
    xp = tl.load(base + rows[:, None] * stride_s + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    fi = tl.where(first, offs_d, offs_d - half)
    c = tl.load(cos_ptr + rows[:, None] * half + fi[None, :], mask=mask, other=0.0)
    s = tl.load(sin_ptr + rows[:, None] * half + fi[None, :], mask=mask, other=0.0)
    sign = tl.where(first, -1.0, 1.0)
    r = x.to(tl.float32) * c + sign[None, :] * xp * s
    return _to_out(r, x.dtype)


@triton.jit
def _rope_attn_kernel(q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, o_ptr, H, S, D, qk_scale,
                      sqb, sqs, sqh, skb, sks, skh, svb, svs, svh,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)       # longest rows first
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    q = _rope_rows(q_ptr + b * sqb + h * sqh, offs_m, sqs, offs_d, D, S, cos_ptr, sin_ptr)
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, S)
    for start in range(0, end, BLOCK_N):
        cols = start + offs_n
        kr = _rope_rows(k_base, cols, sks, offs_d, D, S, cos_ptr, sin_ptr)      # [BLOCK_N, BLOCK_D]
        s = tl.dot(q, tl.trans(kr)) * qk_scale
        s = tl.where((cols[None, :] <= offs_m[:, None]) & (cols[None, :] < S), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(v_base + cols[:, None] * svs + offs_d[None, :], mask=(cols[:, None] < S) & dmask[None, :],
                     other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_offs = ((b * S + offs_m[:, None]) * H + h) * D + offs_d[None, :]
    tl.store(o_ptr + o_offs, _to_out(out, o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & dmask[None, :])


def rope_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                          sin: torch.Tensor) -> torch.Tensor:
    b, s, h, d = q.shape
    out = torch.empty((b, s, h, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    q, k, v = (x if x.stride(3) == 1 else x.contiguous() for x in (q, k, v))
    cos, sin = cos.contiguous(), sin.contiguous()
    block_d = max(16, triton.next_power_of_2(d))
    block_m = min(128 if block_d <= 128 else 64, max(16, triton.next_power_of_2(s)))
    block_n = min(64, max(16, triton.next_power_of_2(s)))
    grid = (triton.cdiv(s, block_m), b * h)
    _rope_attn_kernel[grid](q, k, v, cos, sin, out, h, s, d, 1.4426950408889634 / math.sqrt(d),
                            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                            v.stride(0), v.stride(1), v.stride(2), BLOCK_M=block_m, BLOCK_N=block_n,
                            BLOCK_D=block_d, num_warps=8 if block_m * block_d >= 128 * 128 else 4, num_stages=2)
    return out
