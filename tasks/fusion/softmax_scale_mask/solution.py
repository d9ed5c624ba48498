"""Triton scaled masked softmax: BLOCK_M score rows per program, each row whole in registers
(Sk <= 16384); the mask row is shared by all heads and indexed as (b, query). Exponentials use
exp2 with log2(e) folded into the scale."""
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
def _softmax_mask_kernel(x_ptr, m_ptr, out_ptr, R, H, SQ, SK, scale_log2e,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    inb = (rows[:, None] < R) & (cols[None, :] < SK)
    bq = (rows // (H * SQ)) * SQ + rows % SQ          # mask row of (b, query)
    keep = tl.load(m_ptr + bq[:, None] * SK + cols[None, :], mask=inb, other=0) != 0
    x = tl.load(x_ptr + rows[:, None] * SK + cols[None, :], mask=inb, other=0.0).to(tl.float32)
    s = tl.where(keep, x * scale_log2e, float("-inf"))
    mx = tl.max(s, axis=1)
    mx = tl.where(mx == float("-inf"), 0.0, mx)      # fully masked row: avoid inf - inf
    e = tl.where(keep, tl.exp2(s - mx[:, None]), 0.0)
    den = tl.sum(e, axis=1)
    den = tl.where(den == 0.0, 1.0, den)
    p = e / den[:, None]
    tl.store(out_ptr + rows[:, None] * SK + cols[None, :], _to_out(p, out_ptr.dtype.element_ty), mask=inb)


def softmax_scale_mask(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    b, h, sq, sk = scores.shape
    out = torch.empty((b, h, sq, sk), dtype=scores.dtype, device=scores.device)
    if out.numel() == 0:
        return out
    scores = scores.contiguous()
    m8 = mask.contiguous().view(torch.uint8)
    r = b * h * sq
    block_n = triton.next_power_of_2(sk)
    block_m = min(triton.next_power_of_2(r), max(1, 4096 // block_n))
    warps = min(16, max(1, block_m * block_n // 512))
    _softmax_mask_kernel[(triton.cdiv(r, block_m),)](scores, m8, out, r, h, sq, sk, scale * 1.4426950408889634,
                                                     BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    return out
