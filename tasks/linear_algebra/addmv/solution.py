"""Triton addmv: each program owns BLOCK_M rows, sweeps the columns in BLOCK_N chunks into an fp32
tile (laid along the contiguous axis of `mat`), reduces it, and applies beta/alpha; `input` is
not read at all when beta == 0."""
import torch
import triton
import triton.language as tl


@triton.jit
def _addmv_kernel(in_ptr, a_ptr, x_ptr, y_ptr, M, N, s_in, s_am, s_an, s_x, beta, alpha,
                  USE_INPUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * s_am
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        a = tl.load(a_rows + cols[None, :] * s_an, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        x = tl.load(x_ptr + cols * s_x, mask=col_mask, other=0.0)
        acc += a * x[None, :]
    out = alpha * tl.sum(acc, axis=1)
    if USE_INPUT:
        out = beta * tl.load(in_ptr + rows * s_in, mask=row_mask, other=0.0) + out
    tl.store(y_ptr + rows, out, mask=row_mask)


def addmv(input: torch.Tensor, mat: torch.Tensor, vec: torch.Tensor, beta: float = 1.0,
          alpha: float = 1.0) -> torch.Tensor:
    M, N = mat.shape
    y = torch.empty(M, dtype=torch.float32, device=mat.device)
    if M == 0:
        return y
    if mat.stride(1) != 1 and mat.stride(0) == 1:  # column-major: 128-byte column runs coalesce
        block_m, block_n = 32, 128
    else:
        block_n = min(triton.next_power_of_2(N), 512)
        # ~1024+ programs on large inputs; small inputs take as many rows as fit in 4K elements
        block_m = min(max(1, triton.next_power_of_2(M) // 1024), 4096 // block_n)
        if M * N <= (1 << 20):
            block_m = 4096 // block_n
    block_m = min(block_m, triton.next_power_of_2(M))
    _addmv_kernel[(triton.cdiv(M, block_m),)](input, mat, vec, y, M, N, input.stride(0), mat.stride(0),
                                              mat.stride(1), vec.stride(0), beta, alpha, USE_INPUT=beta != 0,
                                              BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return y
