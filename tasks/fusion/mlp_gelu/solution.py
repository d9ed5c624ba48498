"""Triton GPT-2 MLP in two GEMM launches with fused epilogues: (1) h = gelu_tanh(x @ w1.T + b1),
stored once in the input dtype; (2) out = h @ w2.T + b2. Both use BLOCK_M x BLOCK_N tiles with
float32 tl.dot accumulation and grouped tile order. tanh is built from exp."""
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
def _linear_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, GELU: tl.constexpr,
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
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    h = acc + bias[None, :]
    if GELU:
        u = 0.7978845608028654 * (h + 0.044715 * h * h * h)
        e = tl.exp(-2.0 * tl.abs(u))
        t = (1.0 - e) / (1.0 + e)
        h = 0.5 * h * (1.0 + tl.where(u < 0, -t, t))
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(out_ptrs, _to_out(h, out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor, gelu: bool) -> None:
    m, k = x.shape
    n = w.shape[0]
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(128, max(16, triton.next_power_of_2(n)))
    bk = min(64, max(16, triton.next_power_of_2(k)))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _linear_kernel[grid](x, w, b, out, m, n, k, GELU=gelu, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                         num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)


def mlp_gelu(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
             b2: torch.Tensor) -> torch.Tensor:
    m, e = x.shape
    f = w1.shape[0]
    out = torch.empty((m, e), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x, w1, b1, w2, b2 = (t.contiguous() for t in (x, w1, b1, w2, b2))
    h = torch.empty((m, f), dtype=x.dtype, device=x.device)
    _linear(x, w1, b1, h, True)
    _linear(h, w2, b2, out, False)
    return out
