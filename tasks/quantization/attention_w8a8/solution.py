"""Triton W8A8 flash attention: grid = (query block, batch * head). Each program keeps its int8
query tile, and streams key/value blocks: int8 q @ k^T on tensor cores into an exact int32 tile,
scaled to fp32 logits (per-token q and k scales, sm_scale and log2(e) folded in), an online
softmax with exp2, then p (fp16) @ v (int8 -> fp16, exact) accumulated in fp32. The per-channel
v scale and the 1 / row-sum are applied once at the end. Causal programs stop at the diagonal."""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_w8a8_kernel(q_ptr, k_ptr, v_ptr, qs_ptr, ks_ptr, vs_ptr, out_ptr, S, qk_scale,
                      CAUSAL: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    m_valid = rm < S
    base = bh * S * D
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=m_valid[:, None], other=0)
    qs = tl.load(qs_ptr + bh * S + rm, mask=m_valid, other=0.0) * qk_scale
    m_i = tl.full((BLOCK_M,), -1.0e30, dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (pid_m + 1) * BLOCK_M)
    for start in range(0, hi, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        n_valid = rn < S
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=n_valid[:, None], other=0)
        ks = tl.load(ks_ptr + bh * S + rn, mask=n_valid, other=0.0)
        s_int = tl.dot(q, tl.trans(k), out_dtype=tl.int32)
        s = s_int.to(tl.float32) * qs[:, None] * ks[None, :]  # logits in log2 units
        keep = n_valid[None, :]
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=n_valid[:, None], other=0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v.to(tl.float16))
        m_i = m_new
    vs = tl.load(vs_ptr + bh * D + rd)
    out = acc / l_i[:, None] * vs[None, :]
    tl.store(out_ptr + base + rm[:, None] * D + rd[None, :], out.to(tl.float16), mask=m_valid[:, None])


def attention_w8a8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_scale: torch.Tensor, k_scale: torch.Tensor,
                   v_scale: torch.Tensor, sm_scale: float, causal: bool = False) -> torch.Tensor:
    B, H, S, D = q.shape
    out = torch.empty((B, H, S, D), dtype=torch.float16, device=q.device)
    if out.numel() == 0:
        return out
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    q_scale, k_scale, v_scale = q_scale.contiguous(), k_scale.contiguous(), v_scale.contiguous()
    block_m = max(16, min(128 if D <= 64 else 64, triton.next_power_of_2(S)))
    block_n = max(16, min(64, triton.next_power_of_2(S)))
    grid = (triton.cdiv(S, block_m), B * H)
    _attn_w8a8_kernel[grid](q, k, v, q_scale, k_scale, v_scale, out, S, sm_scale * math.log2(math.e),
                            CAUSAL=causal, D=D, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4, num_stages=2)
    return out
