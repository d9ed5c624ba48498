"""Triton sliding-window flash attention: one program per (query block, batch * head); the key loop
runs only over the blocks intersecting [first_row - window + 1, last_row], and the band mask is
applied to each score tile. Online softmax with exp2, float32 accumulators, P cast to the input
dtype for the PV tl.dot."""
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
def _swa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, S, D, window, qk_scale,
                sqb, sqh, sqs, skb, skh, sks, svb, svh, svs,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
                mask=(offs_m[:, None] < S) & dmask[None, :], other=0.0)
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    lo = tl.maximum(pid_m * BLOCK_M - window + 1, 0)
    lo = (lo // BLOCK_N) * BLOCK_N
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        kt = tl.load(k_base + cols[None, :] * sks + offs_d[:, None], mask=(cols[None, :] < S) & dmask[:, None],
                     other=0.0)
        s = tl.dot(q, kt) * qk_scale
        dist = offs_m[:, None] - cols[None, :]
        s = tl.where((dist >= 0) & (dist < window) & (cols[None, :] < S), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # rows with nothing visible yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(v_base + cols[:, None] * svs + offs_d[None, :], mask=(cols[:, None] < S) & dmask[None, :],
                     other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_offs = (bh.to(tl.int64) * S + offs_m[:, None]) * D + offs_d[None, :]
    tl.store(o_ptr + o_offs, _to_out(out, o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & dmask[None, :])


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    b, h, s, d = q.shape
    out = torch.empty((b, h, s, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    q, k, v = (t if t.stride(3) == 1 else t.contiguous() for t in (q, k, v))
    block_d = max(16, triton.next_power_of_2(d))
    block_m = min(128 if block_d <= 128 else 64, max(16, triton.next_power_of_2(s)))
    block_n = min(64, max(16, triton.next_power_of_2(s)))
    grid = (triton.cdiv(s, block_m), b * h)
    _swa_kernel[grid](q, k, v, out, h, s, d, min(window, s), 1.4426950408889634 / math.sqrt(d),
                      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                      v.stride(0), v.stride(1), v.stride(2), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d,
                      num_warps=8 if block_m * block_d >= 128 * 128 else 4, num_stages=2)
    return out
