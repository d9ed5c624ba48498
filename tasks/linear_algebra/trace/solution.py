"""Triton batched trace: each program takes BLOCK_B matrices and sums BLOCK_D diagonal elements
at a time (addresses base + i * (stride_m + stride_n)) into an fp32 tile reduced at the end."""
import torch
import triton
import triton.language as tl


@triton.jit
def _trace_kernel(x_ptr, out_ptr, B, D, stride_b, stride_diag,
                  BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_mask = rb < B
    base = x_ptr + rb.to(tl.int64) * stride_b
    acc = tl.zeros((BLOCK_B, BLOCK_D), dtype=tl.float32)
    for start in range(0, D, BLOCK_D):
        i = start + tl.arange(0, BLOCK_D)
        mask = b_mask[:, None] & (i < D)[None, :]
        acc += tl.load(base[:, None] + i.to(tl.int64)[None, :] * stride_diag, mask=mask, other=0.0)
    tl.store(out_ptr + rb, tl.sum(acc, axis=1), mask=b_mask)


def trace(x: torch.Tensor) -> torch.Tensor:
    B, M, N = x.shape
    out = torch.empty(B, dtype=x.dtype, device=x.device)
    D = min(M, N)
    if B == 0:
        return out
    block_d = min(triton.next_power_of_2(max(D, 1)), 256)
    block_b = max(1, min(2048 // block_d, triton.next_power_of_2(B)))
    _trace_kernel[(triton.cdiv(B, block_b),)](x, out, B, D, x.stride(0), x.stride(1) + x.stride(2),
                                              BLOCK_B=block_b, BLOCK_D=block_d, num_warps=4)
    return out
