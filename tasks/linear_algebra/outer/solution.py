"""Triton outer product: 2-D tiles; each program loads BLOCK_M entries of x and BLOCK_N of y
(through their strides) and writes their fp32 products, rounded once, to a contiguous tile."""
import torch
import triton
import triton.language as tl


@triton.jit
def _outer_kernel(x_ptr, y_ptr, out_ptr, M, N, stride_x, stride_y,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mm = rm < M
    mn = rn < N
    x = tl.load(x_ptr + rm * stride_x, mask=mm, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + rn * stride_y, mask=mn, other=0.0).to(tl.float32)
    out = x[:, None] * y[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mm[:, None] & mn[None, :])


def outer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    M, N = x.shape[0], y.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    block_n = min(triton.next_power_of_2(N), 512)
    block_m = max(1, min(8192 // block_n, triton.next_power_of_2(M)))
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _outer_kernel[grid](x, y, out, M, N, x.stride(0), y.stride(0),
                        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
    return out
