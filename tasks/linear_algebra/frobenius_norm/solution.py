"""Triton Frobenius norm, deterministic (no atomics). Small matrices: each program takes BLOCK_B
whole matrices and sweeps their M*N logical elements (read through the strides) in BLOCK_E
chunks. Large matrices: grid (matrix, split) programs each write the sum of squares of one
contiguous range, and a second kernel adds each matrix's partials in order and takes the root."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _small_kernel(x_ptr, out_ptr, B, MN, N, sb, sm, sn, BLOCK_B: tl.constexpr, BLOCK_E: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    b_mask = rb < B
    base = x_ptr + rb.to(tl.int64) * sb
    acc = tl.zeros((BLOCK_B, BLOCK_E), dtype=tl.float32)
    for start in range(0, MN, BLOCK_E):
        e = start + tl.arange(0, BLOCK_E)
        mask = b_mask[:, None] & (e < MN)[None, :]
        x = tl.load(base[:, None] + ((e // N) * sm + (e % N) * sn)[None, :], mask=mask, other=0.0)
        acc += x * x
    tl.store(out_ptr + rb, tl.sqrt(tl.sum(acc, axis=1)), mask=b_mask)


@triton.jit
def _partial_kernel(x_ptr, part_ptr, MN, N, per_split, SPLIT, sb, sm, sn, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    s = tl.program_id(1)
    base = x_ptr + b.to(tl.int64) * sb
    lo = s.to(tl.int64) * per_split
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, per_split, BLOCK):
        offs = lo + start + tl.arange(0, BLOCK)
        x = tl.load(base + (offs // N) * sm + (offs % N) * sn, mask=offs < MN, other=0.0)
        acc += x * x
    tl.store(part_ptr + b * SPLIT + s, tl.sum(acc, axis=0))


@triton.jit
def _final_kernel(part_ptr, out_ptr, B, SPLIT, BLOCK_B: tl.constexpr, BLOCK_S: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rs = tl.arange(0, BLOCK_S)
    mask = (rb < B)[:, None] & (rs < SPLIT)[None, :]
    p = tl.load(part_ptr + rb[:, None] * SPLIT + rs[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rb, tl.sqrt(tl.sum(p, axis=1)), mask=rb < B)


def frobenius_norm(x: torch.Tensor) -> torch.Tensor:
    B, M, N = x.shape
    out = torch.empty(B, dtype=torch.float32, device=x.device)
    MN = M * N
    if B == 0:
        return out
    # split each matrix only when there are few matrices and they are large
    split = max(1, min(256, triton.cdiv(1024, B), MN // (8 * BLOCK)))
    if split == 1:
        block_e = min(triton.next_power_of_2(max(MN, 1)), BLOCK)
        block_b = max(1, min(4096 // block_e, triton.next_power_of_2(B)))
        _small_kernel[(triton.cdiv(B, block_b),)](x, out, B, MN, N, *x.stride(), BLOCK_B=block_b, BLOCK_E=block_e,
                                                  num_warps=4)
        return out
    per_split = triton.cdiv(triton.cdiv(MN, split), BLOCK) * BLOCK
    split = triton.cdiv(MN, per_split)
    partials = torch.empty((B, split), dtype=torch.float32, device=x.device)
    _partial_kernel[(B, split)](x, partials, MN, N, per_split, split, *x.stride(), BLOCK=BLOCK, num_warps=4)
    block_s = triton.next_power_of_2(split)
    block_b = max(1, min(1024 // block_s, triton.next_power_of_2(B)))
    _final_kernel[(triton.cdiv(B, block_b),)](partials, out, B, split, BLOCK_B=block_b, BLOCK_S=block_s,
                                              num_warps=4)
    return out
