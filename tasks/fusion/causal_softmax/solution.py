"""Triton scaled causal softmax: BLOCK_M score rows per program, each row whole in registers
(Sk <= 16384), addressed through the (b, h, query) strides; the causal bound is computed from the
query index, masked positions are written as 0. exp2 with log2(e) folded into the scale."""
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
def _causal_softmax_kernel(x_ptr, out_ptr, R, H, SQ, SK, sb, sh, sq_stride, scale_log2e,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    qi = rows % SQ
    bh = rows // SQ
    src = (bh // H) * sb + (bh % H) * sh + qi * sq_stride
    inb = (rows[:, None] < R) & (cols[None, :] < SK)
    keep = inb & (cols[None, :] <= (qi + SK - SQ)[:, None])
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=keep, other=0.0).to(tl.float32)
    s = tl.where(keep, x * scale_log2e, float("-inf"))
    mx = tl.max(s, axis=1)
    mx = tl.where(mx == float("-inf"), 0.0, mx)      # padding rows beyond R
    e = tl.where(keep, tl.exp2(s - mx[:, None]), 0.0)
    den = tl.sum(e, axis=1)
    den = tl.where(den == 0.0, 1.0, den)
    p = e / den[:, None]
    tl.store(out_ptr + rows[:, None] * SK + cols[None, :], _to_out(p, out_ptr.dtype.element_ty), mask=inb)


def causal_softmax(scores: torch.Tensor, scale: float) -> torch.Tensor:
    b, h, sq, sk = scores.shape
    out = torch.empty((b, h, sq, sk), dtype=scores.dtype, device=scores.device)
    if out.numel() == 0:
        return out
    if scores.stride(3) != 1:
        scores = scores.contiguous()
    r = b * h * sq
    block_n = triton.next_power_of_2(sk)
    block_m = min(triton.next_power_of_2(r), max(1, 4096 // block_n))
    warps = min(16, max(1, block_m * block_n // 512))
    _causal_softmax_kernel[(triton.cdiv(r, block_m),)](scores, out, r, h, sq, sk, scores.stride(0), scores.stride(1),
                                                       scores.stride(2), scale * 1.4426950408889634,
                                                       BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    return out
