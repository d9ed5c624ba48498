"""Triton variable-length causal flash attention: a grid of (query block, sequence * head); each
program reads its sequence's [start, end) from cu_seqlens and works in local positions. Query
blocks past the sequence's length run zero iterations and store nothing; key blocks past the
block's diagonal are never visited, so no read crosses a sequence boundary. Online softmax with
exp2, float32 accumulators, P cast to the input dtype for the PV tl.dot."""
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
def _varlen_attn_kernel(q_ptr, k_ptr, v_ptr, cu_ptr, o_ptr, H, D, qk_scale, sqt, sqh, skt, skh, svt, svh,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)       # longest rows first
    bh = tl.program_id(1)
    b = bh // H
    h = (bh % H).to(tl.int64)
    start = tl.load(cu_ptr + b).to(tl.int64)
    seq_len = (tl.load(cu_ptr + b + 1) - tl.load(cu_ptr + b)).to(tl.int32)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)         # local query positions
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    rmask = offs_m < seq_len
    q = tl.load(q_ptr + (start + offs_m[:, None]) * sqt + h * sqh + offs_d[None, :],
                mask=rmask[:, None] & dmask[None, :], other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)
    for kstart in range(0, end, BLOCK_N):
        cols = kstart + offs_n
        cmask = cols < seq_len
        kt = tl.load(k_ptr + (start + cols[None, :]) * skt + h * skh + offs_d[:, None],
                     mask=cmask[None, :] & dmask[:, None], other=0.0)
        s = tl.dot(q, kt) * qk_scale
        s = tl.where((cols[None, :] <= offs_m[:, None]) & cmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(v_ptr + (start + cols[:, None]) * svt + h * svh + offs_d[None, :],
                     mask=cmask[:, None] & dmask[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_offs = ((start + offs_m[:, None]) * H + h) * D + offs_d[None, :]
    tl.store(o_ptr + o_offs, _to_out(out, o_ptr.dtype.element_ty), mask=rmask[:, None] & dmask[None, :])


def varlen_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                            max_seqlen: int) -> torch.Tensor:
    t, h, d = q.shape
    out = torch.empty((t, h, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    q, k, v = (x if x.stride(2) == 1 else x.contiguous() for x in (q, k, v))
    cu = cu_seqlens.contiguous()
    nseq = cu.shape[0] - 1
    block_d = max(16, triton.next_power_of_2(d))
    block_m = min(128 if block_d <= 128 else 64, max(16, triton.next_power_of_2(max_seqlen)))
    block_n = min(64, max(16, triton.next_power_of_2(max_seqlen)))
    grid = (triton.cdiv(max_seqlen, block_m), nseq * h)
    _varlen_attn_kernel[grid](q, k, v, cu, out, h, d, 1.4426950408889634 / math.sqrt(d), q.stride(0), q.stride(1),
                              k.stride(0), k.stride(1), v.stride(0), v.stride(1), BLOCK_M=block_m, BLOCK_N=block_n,
                              BLOCK_D=block_d, num_warps=8 if block_m * block_d >= 128 * 128 else 4, num_stages=2)
    return out
