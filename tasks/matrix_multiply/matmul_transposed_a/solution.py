"""Triton A^T @ B (fp16): each program loads [BLOCK_K, BLOCK_M] tiles of `a` along its contiguous
M axis and feeds their transpose to tl.dot together with [BLOCK_K, BLOCK_N] tiles of `b`;
fp32 accumulation, grouped tile order for L2 reuse."""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_at_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sak, sam, sbk, sbn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % group_size
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rk.to(tl.int64)[:, None] * sak + rm[None, :] * sam  # [BLOCK_K, BLOCK_M]
    b_ptrs = b_ptr + rk.to(tl.int64)[:, None] * sbk + rn[None, :] * sbn  # [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rk[:, None] < K - k) & (rm[None, :] < M), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(tl.trans(a), b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_transposed_a(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    K, M = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float16, device=a.device)
    if c.numel() == 0:
        return c
    bm = max(16, min(128, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    bk = max(16, min(64, triton.next_power_of_2(K)))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_at_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                            GROUP_M=8, num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    return c
