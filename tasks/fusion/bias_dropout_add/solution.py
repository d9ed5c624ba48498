"""Triton bias + dropout (given mask) + residual: one flat elementwise pass; the bias column is
offset % E and the bool mask is read as bytes."""
import torch
import triton
import triton.language as tl

BLOCK = 4096


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
def _bias_dropout_add_kernel(x_ptr, b_ptr, r_ptr, m_ptr, out_ptr, n, E, inv_keep, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % E, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    keep = tl.load(m_ptr + offs, mask=mask, other=0) != 0
    y = tl.where(keep, (x + b) * inv_keep, 0.0)
    tl.store(out_ptr + offs, _to_out(r + y, out_ptr.dtype.element_ty), mask=mask)


def bias_dropout_add(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, keep_mask: torch.Tensor,
                     p: float) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    x, bias, residual = x.contiguous(), bias.contiguous(), residual.contiguous()
    m8 = keep_mask.contiguous().view(torch.uint8)
    _bias_dropout_add_kernel[(triton.cdiv(n, BLOCK),)](x, bias, residual, m8, out, n, x.shape[-1],
                                                       1.0 / (1.0 - p), BLOCK=BLOCK, num_warps=8)
    return out
