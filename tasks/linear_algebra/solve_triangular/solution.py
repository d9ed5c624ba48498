"""Triton forward substitution: grid = (batch, K tile). Each program keeps the whole [N, BLOCK_K]
solution tile in registers. Step i loads row i of a (masked to j < i, so the upper triangle is
never read), reduces it against the tile, divides by a[i, i] and writes row i into the tile."""
import torch
import triton
import triton.language as tl


@triton.jit
def _trsm_kernel(a_ptr, b_ptr, x_ptr, N, K, sab, sai, saj, sbb, sbi, sbk,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    bid = tl.program_id(0).to(tl.int64)
    rk = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    rn = tl.arange(0, BLOCK_N)
    k_mask = rk < K
    a_base = a_ptr + bid * sab
    b_base = b_ptr + bid * sbb
    x = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for i in range(0, N):
        a_row = tl.load(a_base + i * sai + rn * saj, mask=rn < i, other=0.0)
        s = tl.sum(a_row[:, None] * x, axis=0)
        diag = tl.load(a_base + i * sai + i * saj)
        rhs = tl.load(b_base + i * sbi + rk * sbk, mask=k_mask, other=0.0)
        xi = (rhs - s) / diag
        x = tl.where(rn[:, None] == i, xi[None, :], x)
    out = x_ptr + bid * N * K + rn[:, None] * K + rk[None, :]
    tl.store(out, x, mask=(rn < N)[:, None] & k_mask[None, :])


def solve_triangular(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    B, N, K = b.shape
    x = torch.empty((B, N, K), dtype=torch.float32, device=b.device)
    if x.numel() == 0:
        return x
    block_n = triton.next_power_of_2(N)
    block_k = max(1, min(triton.next_power_of_2(K), 4096 // block_n, 64))
    grid = (B, triton.cdiv(K, block_k))
    _trsm_kernel[grid](a, b, x, N, K, *a.stride(), *b.stride(), BLOCK_N=block_n, BLOCK_K=block_k,
                       num_warps=4)
    return x
