"""Triton fp16 linear: the leading dimensions are flattened into M rows (a view when the rows are
evenly strided), then a tiled tl.dot GEMM reads W^T through its strides (no copy), accumulates in
fp32 and adds the bias in the epilogue before rounding once to fp16."""
import torch
import triton
import triton.language as tl


@triton.jit
def _linear_kernel(x_ptr, w_ptr, b_ptr, c_ptr, M, N, K, sxm, sxk, swn, swk,
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
    x_ptrs = x_ptr + rm.to(tl.int64)[:, None] * sxm + rk[None, :] * sxk
    w_ptrs = w_ptr + rk[:, None] * swk + rn.to(tl.int64)[None, :] * swn  # W^T tile [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc)
        x_ptrs += BLOCK_K * sxk
        w_ptrs += BLOCK_K * swk
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc.to(tl.float16), mask=mask)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    K = x.shape[-1]
    N = weight.shape[0]
    out = torch.empty(x.shape[:-1] + (N,), dtype=torch.float16, device=x.device)
    x2 = x.reshape(-1, K)  # a view for contiguous and row-sliced inputs
    M = x2.shape[0]
    if out.numel() == 0:
        return out
    bm = max(16, min(128, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    bk = max(16, min(64, triton.next_power_of_2(K)))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _linear_kernel[grid](x2, weight, bias, out, M, N, K, x2.stride(0), x2.stride(1), weight.stride(0),
                         weight.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                         num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    return out
