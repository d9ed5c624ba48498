"""Triton SwiGLU: 2-D tiles of [BLOCK_M rows, BLOCK_N output features]; each program reads the
matching gate and up tiles of the same rows (N columns apart) and writes one output tile."""
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
def _swiglu_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    g_ptrs = x_ptr + rm[:, None] * (2 * N) + rn[None, :]
    gate = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(g_ptrs + N, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def swiglu(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    out = torch.empty(tuple(x.shape[:-1]) + (n,), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x = x.contiguous()
    m = x.numel() // (2 * n)
    block_n = min(triton.next_power_of_2(n), 2048)
    block_m = min(max(1, 4096 // block_n), triton.next_power_of_2(m))
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _swiglu_kernel[grid](x, out, m, n, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
    return out
