"""Triton bf16 matmul: tiled tl.dot with fp32 accumulation and grouped tile order. On the GPU the
bf16 tiles go straight to the tensor cores; under the CPU interpreter (where bf16 dot is
unreliable) they are widened to fp32 first, which is exact, and the result is rounded to bf16
with an explicit round-to-nearest-even on the bits, because the interpreter's own conversion
truncates (NATIVE is a compile-time switch)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_bf16_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
                        NATIVE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
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
        if NATIVE:
            acc = tl.dot(a, b, acc)
        else:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    if NATIVE:
        c = acc.to(tl.bfloat16)
    else:  # round to nearest even by hand (finite values)
        bits = acc.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        c = bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    tl.store(c_ptrs, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    if c.numel() == 0:
        return c
    bm = max(16, min(128, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    bk = max(16, min(64, triton.next_power_of_2(K)))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_bf16_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), NATIVE=a.is_cuda, BLOCK_M=bm,
                              BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=8 if bm * bn >= 128 * 128 else 4,
                              num_stages=3)
    return c
