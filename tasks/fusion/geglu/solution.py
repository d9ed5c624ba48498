"""Triton GeGLU: 2-D tiles of [BLOCK_M rows, BLOCK_N features]; gate and up are read through their
own row strides (so the two halves of a fused projection need no copy)."""
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
def _geglu_kernel(g_ptr, u_ptr, out_ptr, M, N, stride_g, stride_u,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    gate = tl.load(g_ptr + rm[:, None] * stride_g + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    up = tl.load(u_ptr + rm[:, None] * stride_u + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    out = 0.5 * gate * (1.0 + tl.math.erf(gate * 0.7071067811865476)) * up
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    t2 = t.reshape(-1, n)  # a view when the leading dims can be merged
    return t2 if t2.stride(1) == 1 else t2.contiguous()


def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    n = gate.shape[-1]
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() == 0:
        return out
    g2, u2 = _rows(gate, n), _rows(up, n)
    m = g2.shape[0]
    block_n = min(triton.next_power_of_2(n), 2048)
    block_m = min(max(1, 4096 // block_n), triton.next_power_of_2(m))
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _geglu_kernel[grid](g2, u2, out, m, n, g2.stride(0), u2.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
                        num_warps=8)
    return out
