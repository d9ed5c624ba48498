"""Triton cross product: each program takes BLOCK vectors, loads the three components of a and b
through the strides (AoS or SoA), and writes the three result components."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _cross_kernel(a_ptr, b_ptr, out_ptr, R, sar, sac, sbr, sbc, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = r < R
    a0 = tl.load(a_ptr + r * sar, mask=mask)
    a1 = tl.load(a_ptr + r * sar + sac, mask=mask)
    a2 = tl.load(a_ptr + r * sar + 2 * sac, mask=mask)
    b0 = tl.load(b_ptr + r * sbr, mask=mask)
    b1 = tl.load(b_ptr + r * sbr + sbc, mask=mask)
    b2 = tl.load(b_ptr + r * sbr + 2 * sbc, mask=mask)
    o = out_ptr + r * 3
    tl.store(o, a1 * b2 - a2 * b1, mask=mask)
    tl.store(o + 1, a2 * b0 - a0 * b2, mask=mask)
    tl.store(o + 2, a0 * b1 - a1 * b0, mask=mask)


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    R = a.shape[0]
    out = torch.empty((R, 3), dtype=a.dtype, device=a.device)
    if R == 0:
        return out
    _cross_kernel[(triton.cdiv(R, BLOCK),)](a, b, out, R, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                            BLOCK=BLOCK, num_warps=4)
    return out
