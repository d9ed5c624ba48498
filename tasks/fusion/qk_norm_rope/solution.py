"""Triton QK-norm + rotate-half RoPE: BLOCK_M (token, head) vectors per program, addressed through
the tensor's token and head strides (views into a fused QKV buffer are read in place). The row's
1/rms comes from the full head vector; each feature's rotation partner (i +- D/2) is loaded
alongside and normalized with the same factor, so norm and rotation finish in registers. One
launch per tensor."""
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
def _norm_rope_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, pos_ptr, out_ptr, NR, H, D, stride_t, stride_h, eps,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < NR
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    tok = rows // H
    src = tok * stride_t + (rows % H) * stride_h
    half = D // 2
    first = cols < half
    partner = tl.where(first, cols + half, cols - half)
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(x_ptr + src[:, None] + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    wp = tl.load(w_ptr + partner, mask=cmask, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    yp = xp * rstd[:, None] * wp[None, :]
    pos = tl.load(pos_ptr + tok, mask=rmask, other=0)
    fi = tl.where(first, cols, cols - half)
    c = tl.load(cos_ptr + pos[:, None] * half + fi[None, :], mask=mask, other=1.0)
    s = tl.load(sin_ptr + pos[:, None] * half + fi[None, :], mask=mask, other=0.0)
    sign = tl.where(first, -1.0, 1.0)
    out = y * c + sign[None, :] * yp * s
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def _apply(x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
           eps: float) -> torch.Tensor:
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
    _norm_rope_kernel[(triton.cdiv(nr, block_m),)](x, w.contiguous(), cos, sin, positions, out, nr, h, d,
                                                   x.stride(0), x.stride(1), eps, BLOCK_M=block_m, BLOCK_D=block_d,
                                                   num_warps=warps)
    return out


def qk_norm_rope(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                 cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                 eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin, positions = cos.contiguous(), sin.contiguous(), positions.contiguous()
    return _apply(q, q_weight, cos, sin, positions, eps), _apply(k, k_weight, cos, sin, positions, eps)
