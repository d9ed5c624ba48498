"""Triton cosine similarity: each program owns BLOCK_R rows and accumulates x1.x2, |x1|^2 and
|x2|^2 in fp32 tiles in one sweep over D; the norms are clamped to eps separately at the end.
A broadcast x2 row is addressed with row stride 0."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cos_kernel(x1_ptr, x2_ptr, out_ptr, R, D, s1r, s1d, s2r, s2d, eps,
                BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    r64 = rows.to(tl.int64)
    dot = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    sq1 = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    sq2 = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    for start in range(0, D, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = row_mask[:, None] & (cols < D)[None, :]
        a = tl.load(x1_ptr + r64[:, None] * s1r + cols[None, :] * s1d, mask=mask, other=0.0)
        b = tl.load(x2_ptr + r64[:, None] * s2r + cols[None, :] * s2d, mask=mask, other=0.0)
        dot += a * b
        sq1 += a * a
        sq2 += b * b
    n1 = tl.maximum(tl.sqrt(tl.sum(sq1, axis=1)), eps)
    n2 = tl.maximum(tl.sqrt(tl.sum(sq2, axis=1)), eps)
    tl.store(out_ptr + rows, tl.sum(dot, axis=1) / (n1 * n2), mask=row_mask)


def cosine_similarity(x1: torch.Tensor, x2: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    R, D = x1.shape
    out = torch.empty(R, dtype=torch.float32, device=x1.device)
    if R == 0:
        return out
    s2r = 0 if x2.shape[0] == 1 else x2.stride(0)
    block_d = min(triton.next_power_of_2(D), 512)
    block_r = max(1, min(2048 // block_d, triton.next_power_of_2(R)))
    _cos_kernel[(triton.cdiv(R, block_r),)](x1, x2, out, R, D, x1.stride(0), x1.stride(1), s2r, x2.stride(1), eps,
                                            BLOCK_R=block_r, BLOCK_D=block_d, num_warps=4)
    return out
