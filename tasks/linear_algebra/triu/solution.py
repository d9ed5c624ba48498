"""Triton triu: grid = (matrix, row tile, column tile). Each program reads its tile through the
input strides (elements below the kept diagonal are not read at all) and writes a contiguous
output tile."""
import torch
import triton
import triton.language as tl


@triton.jit
def _triu_kernel(x_ptr, out_ptr, M, N, diagonal, stride_b, stride_m, stride_n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    keep = inside & ((rn[None, :] - rm[:, None]) >= diagonal)
    src = x_ptr + b * stride_b + rm[:, None] * stride_m + rn[None, :] * stride_n
    vals = tl.load(src, mask=keep, other=0.0)
    dst = out_ptr + b * M * N + rm[:, None] * N + rn[None, :]
    tl.store(dst, vals, mask=inside)


def triu(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    M, N = x.shape[-2], x.shape[-1]
    x3 = x if x.dim() == 3 else x.unsqueeze(0)
    B = x3.shape[0]
    diagonal = max(min(diagonal, N + 1), -M - 1)  # clamp so huge values cannot overflow int32
    if x3.stride(-1) != 1 and x3.stride(-2) == 1:  # transposed view: tall tiles read columns
        block_m, block_n = 64, 32
    else:
        block_m, block_n = 32, 64
    block_m = min(block_m, triton.next_power_of_2(M))
    block_n = min(block_n, triton.next_power_of_2(N))
    grid = (B, triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    _triu_kernel[grid](x3, out, M, N, diagonal, x3.stride(0), x3.stride(1), x3.stride(2),
                       BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return out
