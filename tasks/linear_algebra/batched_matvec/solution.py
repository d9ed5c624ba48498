"""Triton batched matvec: grid = (batch, row block). Each program sweeps N in BLOCK_N chunks into
an fp32 [BLOCK_M, BLOCK_N] tile (laid along the contiguous axis of `a`), reduced once."""
import torch
import triton
import triton.language as tl


@triton.jit
def _bmv_kernel(a_ptr, x_ptr, y_ptr, M, N, sab, sam, san, sxb, sxn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    a_rows = a_ptr + b * sab + rows.to(tl.int64)[:, None] * sam
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        a = tl.load(a_rows + cols[None, :] * san, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + b * sxb + cols * sxn, mask=col_mask, other=0.0)
        acc += a * x[None, :]
    tl.store(y_ptr + b * M + rows, tl.sum(acc, axis=1), mask=row_mask)


def batched_matvec(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    B, M, N = a.shape
    y = torch.empty((B, M), dtype=torch.float32, device=a.device)
    if y.numel() == 0:
        return y
    if a.stride(2) != 1 and a.stride(1) == 1:  # column-major matrices: long runs down the rows
        block_m, block_n = 64, 32
    else:
        block_n = min(triton.next_power_of_2(N), 256)
        block_m = max(1, 4096 // block_n)
    block_m = min(block_m, triton.next_power_of_2(M))
    grid = (B, triton.cdiv(M, block_m))
    _bmv_kernel[grid](a, x, y, M, N, *a.stride(), *x.stride(), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return y
