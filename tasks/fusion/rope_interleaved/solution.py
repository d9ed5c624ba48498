"""Triton interleaved RoPE: BLOCK_M (b, s, h) head vectors per program, addressed through x's
three outer strides. Each feature loads its pair partner (index ^ 1) alongside, and the cos/sin of
its pair from the sequence position's table row."""
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
def _rope_interleaved_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, NR, S, H, D, sb, ss, sh,
                             BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < NR) & (cols[None, :] < D)
    hi = rows % H
    si = (rows // H) % S
    bi = rows // (H * S)
    src = bi * sb + si * ss + hi * sh
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(x_ptr + src[:, None] + (cols ^ 1)[None, :], mask=mask, other=0.0).to(tl.float32)
    half = D // 2
    c = tl.load(cos_ptr + si[:, None] * half + (cols // 2)[None, :], mask=mask, other=1.0)
    s = tl.load(sin_ptr + si[:, None] * half + (cols // 2)[None, :], mask=mask, other=0.0)
    sign = tl.where((cols % 2) == 0, -1.0, 1.0)
    out = x * c + sign[None, :] * xp * s
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    b, s, h, d = x.shape
    out = torch.empty((b, s, h, d), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if x.stride(3) != 1:
        x = x.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    nr = b * s * h
    block_d = triton.next_power_of_2(d)
    block_m = min(triton.next_power_of_2(nr), max(1, 4096 // block_d))
    warps = min(8, max(1, block_m * block_d // 512))
    _rope_interleaved_kernel[(triton.cdiv(nr, block_m),)](x, cos, sin, out, nr, s, h, d, x.stride(0), x.stride(1),
                                                          x.stride(2), BLOCK_M=block_m, BLOCK_D=block_d,
                                                          num_warps=warps)
    return out
