"""Triton W4A16 linear: output tiles of BLOCK_M x BLOCK_N; for each BLOCK_K step the program
gathers the packed bytes of a [BLOCK_K, BLOCK_N] tile of W^T (byte k // 2 of row n, nibble k % 2),
subtracts the zero point 8, multiplies by the group scale of column k, rounds to fp16 and feeds
tl.dot with the fp16 activation tile; fp32 accumulation, one rounding at the store."""
import torch
import triton
import triton.language as tl


@triton.jit
def _w4a16_kernel(x_ptr, qw_ptr, s_ptr, out_ptr, M, N, K, G, n_groups, sxm, sxk,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_mask = rm < M
    n_mask = rn < N
    half_k = K // 2
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_mask = kk < K
        x = tl.load(x_ptr + rm.to(tl.int64)[:, None] * sxm + kk[None, :] * sxk,
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        wmask = k_mask[:, None] & n_mask[None, :]
        packed = tl.load(qw_ptr + rn.to(tl.int64)[None, :] * half_k + (kk // 2)[:, None], mask=wmask, other=0)
        nib = (packed.to(tl.int32) >> ((kk % 2) * 4)[:, None]) & 0xF
        sc = tl.load(s_ptr + rn.to(tl.int64)[None, :] * n_groups + (kk // G)[:, None], mask=wmask, other=0.0)
        w = ((nib - 8).to(tl.float32) * sc.to(tl.float32)).to(tl.float16)  # [BLOCK_K, BLOCK_N] of W^T
        acc = tl.dot(x, w, acc)
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc.to(tl.float16),
             mask=m_mask[:, None] & n_mask[None, :])


def linear_w4a16(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    M, K = x.shape
    N = qweight.shape[0]
    out = torch.empty((M, N), dtype=torch.float16, device=x.device)
    if out.numel() == 0:
        return out
    qweight, scales = qweight.contiguous(), scales.contiguous()
    bm = max(16, min(64, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    if M <= 16:
        bn = max(16, min(64, triton.next_power_of_2(N)))  # more programs for the weight-bound decode
    bk = max(16, min(64, triton.next_power_of_2(K)))
    grid = (triton.cdiv(N, bn), triton.cdiv(M, bm))
    _w4a16_kernel[grid](x, qweight, scales, out, M, N, K, group_size, K // group_size, x.stride(0), x.stride(1),
                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=3)
    return out
