"""Triton L2 norm: each program owns BLOCK_R rows and sweeps the last dimension in BLOCK_D chunks,
accumulating squares in an fp32 tile that is reduced once; rows are addressed through strides."""
import torch
import triton
import triton.language as tl


@triton.jit
def _norm_kernel(x_ptr, out_ptr, R, D, R1, s0, s1, s2, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    x_rows = x_ptr + (rows // R1).to(tl.int64) * s0 + (rows % R1).to(tl.int64) * s1
    acc = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    for start in range(0, D, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = row_mask[:, None] & (cols < D)[None, :]
        x = tl.load(x_rows[:, None] + cols[None, :] * s2, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    out = tl.sqrt(tl.sum(acc, axis=1))
    tl.store(out_ptr + rows, out.to(out_ptr.dtype.element_ty), mask=row_mask)


def vector_norm(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    x3 = x if x.dim() == 3 else x.unsqueeze(0)
    R1, D = x3.shape[1], x3.shape[2]
    R = x3.shape[0] * R1
    if R == 0:
        return out
    block_d = min(triton.next_power_of_2(D), 1024)
    block_r = max(1, min(4096 // block_d, triton.next_power_of_2(R)))
    _norm_kernel[(triton.cdiv(R, block_r),)](x3, out, R, D, R1, *x3.stride(),
                                             BLOCK_R=block_r, BLOCK_D=block_d, num_warps=4)
    return out
