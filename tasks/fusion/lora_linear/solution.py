"""Triton LoRA linear in two launches: (1) t = x @ A.T, a thin [M, R] GEMM kept in float32 and
pre-multiplied by `scaling`; (2) the base GEMM x @ W.T with float32 accumulation whose epilogue adds
the bias and t @ B.T (one more tl.dot over the padded rank, t rounded to the input dtype for the
tensor cores) before the single store."""
import torch
import triton
import triton.language as tl


@triton.jit
def _to_out(v, dtype: tl.constexpr):
    """fp32 -> dtype, round-to-nearest-even (bf16 rounded on the bits: the CPU interpreter would
    truncate)."""
    if dtype == tl.bfloat16:
        u = v.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        v = u.to(tl.float32, bitcast=True)
    return v.to(dtype)


@triton.jit
def _lora_down_kernel(x_ptr, a_ptr, t_ptr, M, K, R, scaling,
                      BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rr = tl.arange(0, BLOCK_R)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    a_ptrs = a_ptr + rr[None, :] * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        xa = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        aa = tl.load(a_ptrs, mask=(rk[:, None] < K - k) & (rr[None, :] < R), other=0.0)
        acc = tl.dot(xa, aa, acc)
        x_ptrs += BLOCK_K
        a_ptrs += BLOCK_K
    tl.store(t_ptr + rm[:, None].to(tl.int64) * BLOCK_R + rr[None, :], acc * scaling, mask=rm[:, None] < M)


@triton.jit
def _lora_main_kernel(x_ptr, w_ptr, bias_ptr, t_ptr, b_ptr, out_ptr, M, N, K, R,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      BLOCK_R: tl.constexpr, GROUP_M: tl.constexpr):
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
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    rr = tl.arange(0, BLOCK_R)
    t = tl.load(t_ptr + rm[:, None].to(tl.int64) * BLOCK_R + rr[None, :], mask=rm[:, None] < M, other=0.0)
    lb = tl.load(b_ptr + rn[None, :].to(tl.int64) * R + rr[:, None], mask=(rr[:, None] < R) & (rn[None, :] < N),
                 other=0.0)
    acc = tl.dot(t.to(lb.dtype), lb, acc)
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    acc = acc + bias[None, :]
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(out_ptrs, _to_out(acc, out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lora_a: torch.Tensor,
                lora_b: torch.Tensor, scaling: float) -> torch.Tensor:
    m, k = x.shape
    n = weight.shape[0]
    r = lora_a.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    lora_a, lora_b = lora_a.contiguous(), lora_b.contiguous()
    br = max(16, triton.next_power_of_2(r))
    t = torch.empty((m, br), dtype=torch.float32, device=x.device)   # padded columns are written as 0
    bk = min(64, max(16, triton.next_power_of_2(k)))
    bm_down = min(64, max(16, triton.next_power_of_2(m)))
    _lora_down_kernel[(triton.cdiv(m, bm_down),)](x, lora_a, t, m, k, r, scaling, BLOCK_M=bm_down, BLOCK_R=br,
                                                  BLOCK_K=bk, num_warps=4)
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(128, max(16, triton.next_power_of_2(n)))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _lora_main_kernel[grid](x, weight, bias, t, lora_b, out, m, n, k, r, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                            BLOCK_R=br, GROUP_M=8, num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    return out
