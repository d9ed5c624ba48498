"""Triton QK-norm: one launch per tensor; BLOCK_M head vectors per program, each addressed as
(token, head) through the tensor's token and head strides, so views into a fused QKV buffer are
read in place."""
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
def _head_rmsnorm_kernel(x_ptr, w_ptr, out_ptr, R, H, DH, stride_tok, stride_head, eps,
                         BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < DH
    mask = (rows[:, None] < R) & cmask[None, :]
    src = (rows // H) * stride_tok + (rows % H) * stride_head
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / DH + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    out = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * DH + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def _norm_heads(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    b, s, h, dh = x.shape
    out = torch.empty((b, s, h, dh), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x3 = x.reshape(b * s, h, dh)  # a view for contiguous tensors and views into a fused QKV buffer
    if x3.stride(2) != 1:
        x3 = x3.contiguous()
    r = b * s * h
    block_d = triton.next_power_of_2(dh)
    block_m = min(triton.next_power_of_2(r), max(1, 4096 // block_d))
    warps = min(8, max(1, block_m * block_d // 512))
    _head_rmsnorm_kernel[(triton.cdiv(r, block_m),)](x3, w.contiguous(), out, r, h, dh, x3.stride(0), x3.stride(1),
                                                     eps, BLOCK_M=block_m, BLOCK_D=block_d, num_warps=warps)
    return out


def qk_rmsnorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
               eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    return _norm_heads(q, q_weight, eps), _norm_heads(k, k_weight, eps)
