"""Triton exp (computed in fp32): a flat elementwise kernel for contiguous inputs; 2-D strided
views (e.g. transposed) go through 64x64 tiles, so that both the strided read and the contiguous
write coalesce (Triton converts the tile layout in between)."""
import torch
import triton
import triton.language as tl

BLOCK = 2048
TILE = 64


@triton.jit
def _exp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.exp(x.to(tl.float32)).to(x.dtype), mask=mask)


@triton.jit
def _exp_2d_kernel(x_ptr, y_ptr, R, C, stride_r, stride_c, TILE: tl.constexpr):
    rows = tl.program_id(0) * TILE + tl.arange(0, TILE)
    cols = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = (rows < R)[:, None] & (cols < C)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=mask)
    tl.store(y_ptr + rows[:, None] * C + cols[None, :], tl.exp(x.to(tl.float32)).to(x.dtype), mask=mask)


def exp(x: torch.Tensor) -> torch.Tensor:
    if not x.is_contiguous() and x.dim() != 2:
        x = x.contiguous()  # only 2-D strided views are read in place
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return y
    if x.is_contiguous():
        _exp_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=8)
    else:
        R, C = x.shape
        grid = (triton.cdiv(R, TILE), triton.cdiv(C, TILE))
        _exp_2d_kernel[grid](x, y, R, C, x.stride(0), x.stride(1), TILE=TILE, num_warps=4)
    return y
