"""Triton exp: a flat elementwise kernel computing in fp32; 2-D strided inputs are read through
their strides."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _exp_kernel(x_ptr, y_ptr, n, n_cols, stride_r, stride_c,
                CONTIGUOUS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if CONTIGUOUS:
        src = offs
    else:  # logical row-major index -> strided address of a 2-D view
        src = (offs // n_cols) * stride_r + (offs % n_cols) * stride_c
    x = tl.load(x_ptr + src, mask=mask)
    y = tl.exp(x.to(tl.float32))
    tl.store(y_ptr + offs, y.to(x.dtype), mask=mask)


def exp(x: torch.Tensor) -> torch.Tensor:
    if not x.is_contiguous() and x.dim() != 2:
        x = x.contiguous()  # only 2-D strided views are read in place
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return y
    contiguous = x.is_contiguous()
    n_cols, sr, sc = (1, 0, 0) if contiguous else (x.shape[1], x.stride(0), x.stride(1))
    _exp_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, n_cols, sr, sc,
                                          CONTIGUOUS=contiguous, BLOCK=BLOCK, num_warps=8)
    return y
