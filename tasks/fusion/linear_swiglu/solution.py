"""Triton merged gate/up linear + SwiGLU: each program owns a BLOCK_M x BLOCK_N tile of the output
and accumulates the matching gate and up tiles side by side (two tl.dot per K step sharing the x
tile), then applies silu(gate) * up in float32 and stores once. Grouped tile order for L2 reuse."""
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
def _linear_swiglu_kernel(x_ptr, w_ptr, out_ptr, M, F, K,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(F, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % group_size
    pid_n = (pid % (GROUP_M * num_n)) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    g_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    u_ptrs = g_ptrs + F.to(tl.int64) * K
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kmask = rk < K - k
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & kmask[None, :], other=0.0)
        wmask = kmask[:, None] & (rn[None, :] < F)
        bg = tl.load(g_ptrs, mask=wmask, other=0.0)
        bu = tl.load(u_ptrs, mask=wmask, other=0.0)
        acc_g = tl.dot(a, bg, acc_g)
        acc_u = tl.dot(a, bu, acc_u)
        x_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    out = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * F + rn[None, :]
    tl.store(out_ptrs, _to_out(out, out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < F))


def linear_swiglu(x: torch.Tensor, w_gate_up: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    f = w_gate_up.shape[0] // 2
    out = torch.empty((m, f), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x, w_gate_up = x.contiguous(), w_gate_up.contiguous()
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(64, max(16, triton.next_power_of_2(f)))    # two accumulators per tile
    bk = min(64, max(16, triton.next_power_of_2(k)))
    grid = (triton.cdiv(m, bm) * triton.cdiv(f, bn),)
    _linear_swiglu_kernel[grid](x, w_gate_up, out, m, f, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                num_warps=8 if bm * bn >= 128 * 64 else 4, num_stages=3)
    return out
