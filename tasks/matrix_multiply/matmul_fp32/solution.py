"""Triton fp32 matmul at float32 accuracy: tiled tl.dot with input_precision="tf32x3" (each
operand split into a TF32 high part and a TF32 residual; three tensor-core products recover
about float32 accuracy), fp32 accumulation, grouped tile order, arbitrary strides."""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_fp32_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
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
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    if c.numel() == 0:
        return c
    bm = max(16, min(128, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    bk = max(16, min(32, triton.next_power_of_2(K)))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_fp32_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                              GROUP_M=8, num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    return c
