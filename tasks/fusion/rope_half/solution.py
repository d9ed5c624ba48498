"""Triton rotate-half RoPE: BLOCK_M (token, head) rows per program, each a full head vector of D
features. Every feature loads its rotation partner (i +- R/2) alongside; cos/sin are gathered by
the token's position. Features beyond R pass through. One launch per tensor."""
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
def _rope_half_kernel(x_ptr, cos_ptr, sin_ptr, pos_ptr, out_ptr, NR, H, D, HALF, stride_t, stride_h,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < NR
    mask = rmask[:, None] & (cols[None, :] < D)
    tok = rows // H
    src = tok * stride_t + (rows % H) * stride_h
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    first = cols < HALF
    rot = cols < 2 * HALF
    partner = tl.where(first, cols + HALF, cols - HALF)
    pmask = mask & rot[None, :]
    xp = tl.load(x_ptr + src[:, None] + partner[None, :], mask=pmask, other=0.0).to(tl.float32)
    pos = tl.load(pos_ptr + tok, mask=rmask, other=0)
    fi = tl.where(first, cols, cols - HALF)
    c = tl.load(cos_ptr + pos[:, None] * HALF + fi[None, :], mask=pmask, other=1.0)
    s = tl.load(sin_ptr + pos[:, None] * HALF + fi[None, :], mask=pmask, other=0.0)
    sign = tl.where(first, -1.0, 1.0)
    out = tl.where(rot[None, :], x * c + sign[None, :] * xp * s, x)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    t, h, d = x.shape
    out = torch.empty((t, h, d), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if x.stride(2) != 1:
        x = x.contiguous()
    nr = t * h
    block_d = triton.next_power_of_2(d)
    block_m = min(triton.next_power_of_2(nr), max(1, 4096 // block_d))
    warps = min(8, max(1, block_m * block_d // 512))
    _rope_half_kernel[(triton.cdiv(nr, block_m),)](x, cos, sin, positions, out, nr, h, d, cos.shape[1],
                                                   x.stride(0), x.stride(1), BLOCK_M=block_m, BLOCK_D=block_d,
                                                   num_warps=warps)
    return out


def rope_half(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin, positions = cos.contiguous(), sin.contiguous(), positions.contiguous()
    return _rotate(q, cos, sin, positions), _rotate(k, cos, sin, positions)
