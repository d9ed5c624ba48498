"""Triton adaLN modulation: BLOCK_M rows per program held in registers (D <= 16384); each row's
sample index selects its shift/scale row (read through their row strides)."""
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
def _ln_modulate_kernel(x_ptr, shift_ptr, scale_ptr, out_ptr, M, S, D, stride_shift, stride_scale, eps,
                        BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = (rm[:, None] < M) & (cols[None, :] < D)
    x = tl.load(x_ptr + rm[:, None] * D + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / D
    diff = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / D + eps)
    bi = rm // S
    sh = tl.load(shift_ptr + bi[:, None] * stride_shift + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    sc = tl.load(scale_ptr + bi[:, None] * stride_scale + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    out = diff * rstd[:, None] * (1.0 + sc) + sh
    tl.store(out_ptr + rm[:, None] * D + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def layernorm_modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor,
                       eps: float = 1e-6) -> torch.Tensor:
    b, s, d = x.shape
    out = torch.empty((b, s, d), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x = x.contiguous()
    if shift.stride(1) != 1:
        shift = shift.contiguous()
    if scale.stride(1) != 1:
        scale = scale.contiguous()
    m = b * s
    block_d = triton.next_power_of_2(d)
    block_m = min(triton.next_power_of_2(m), max(1, 4096 // block_d))
    warps = min(16, max(1, block_m * block_d // 512))
    _ln_modulate_kernel[(triton.cdiv(m, block_m),)](x, shift, scale, out, m, s, d, shift.stride(0),
                                                    scale.stride(0), eps, BLOCK_M=block_m, BLOCK_D=block_d,
                                                    num_warps=warps)
    return out
