"""Triton matvec: each program owns BLOCK_M rows and sweeps the columns in BLOCK_N chunks into an
fp32 tile, reduced once at the end. The tile is laid along the contiguous axis of `a`."""
import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_kernel(a_ptr, x_ptr, y_ptr, M, N, stride_am, stride_an, stride_x,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * stride_am
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        a = tl.load(a_rows + cols[None, :] * stride_an, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + cols * stride_x, mask=col_mask, other=0.0)
        acc += a * x[None, :]
    tl.store(y_ptr + rows, tl.sum(acc, axis=1), mask=row_mask)


def matvec(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    y = torch.empty(M, dtype=torch.float32, device=a.device)
    if a.stride(1) != 1 and a.stride(0) == 1:  # column-major: 128-byte column runs coalesce
        block_m, block_n = 32, 128
    else:  # row-major: wide tiles; fewer rows per program while that keeps >= ~1024 programs
        block_n = min(triton.next_power_of_2(N), 512)
        block_m = min(max(1, triton.next_power_of_2(M) // 1024), 4096 // block_n)
    block_m = min(block_m, triton.next_power_of_2(M))
    _matvec_kernel[(triton.cdiv(M, block_m),)](a, x, y, M, N, a.stride(0), a.stride(1), x.stride(0),
                                               BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return y
