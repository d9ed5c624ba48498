"""Triton cross-attention (flash-style forward): one program per (query block, batch * head);
the Sk keys/values are streamed in BLOCK_N tiles (one tile when Sk is small) with an online
softmax (exp2, log2(e) folded into the scale), float32 accumulators and P cast to the input dtype
for the PV tl.dot. D is padded to a power of two with masks; strided inputs are read in place."""
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
def _cross_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, SQ, SK, D, qk_scale,
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
                mask=(offs_m[:, None] < SQ) & dmask[None, :], other=0.0)
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, SK, BLOCK_N):
        cols = start + offs_n
        kt = tl.load(k_base + cols[None, :] * sks + offs_d[:, None], mask=(cols[None, :] < SK) & dmask[:, None],
                     other=0.0)
        s = tl.dot(q, kt) * qk_scale
        s = tl.where(cols[None, :] < SK, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(v_base + cols[:, None] * svs + offs_d[None, :], mask=(cols[:, None] < SK) & dmask[None, :],
                     other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    out = acc / l_i[:, None]
    o_offs = (bh.to(tl.int64) * SQ + offs_m[:, None]) * D + offs_d[None, :]
    tl.store(o_ptr + o_offs, _to_out(out, o_ptr.dtype.element_ty), mask=(offs_m[:, None] < SQ) & dmask[None, :])


def cross_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    b, h, sq, d = q.shape
    sk = k.shape[2]
    out = torch.empty((b, h, sq, d), dtype=q.dtype, device=q.device)
    if out.numel() == 0:
        return out
    q, k, v = (t if t.stride(3) == 1 else t.contiguous() for t in (q, k, v))
    block_d = max(16, triton.next_power_of_2(d))
    block_m = min(128 if block_d <= 64 else 64, max(16, triton.next_power_of_2(sq)))
    block_n = min(128 if sk <= 128 else 64, max(16, triton.next_power_of_2(sk)))
    sm_scale = (1.0 / math.sqrt(d)) if scale is None else scale
    grid = (triton.cdiv(sq, block_m), b * h)
    _cross_attn_kernel[grid](q, k, v, out, h, sq, sk, d, sm_scale * 1.4426950408889634,
                             q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                             v.stride(0), v.stride(1), v.stride(2),
                             BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=4, num_stages=2)
    return out
