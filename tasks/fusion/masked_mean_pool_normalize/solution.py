"""Triton masked mean pooling + L2 normalization: (1) a grid of (sequence, feature block) programs
sweeps S in tiles, accumulating masked sums and the token count in float32 and writing the mean
into the output buffer; (2) one program per sequence rescales its row by the inverse L2 norm in
place (the output is the kernels' own buffer). When one feature block covers D, (1) normalizes
directly and (2) is skipped."""
import torch
import triton
import triton.language as tl


@triton.jit
def _pool_kernel(x_ptr, m_ptr, out_ptr, S, D, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
                 NORMALIZE: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    cnt = tl.zeros((BLOCK_S,), dtype=tl.float32)
    for start in range(0, S, BLOCK_S):
        srow = start + tl.arange(0, BLOCK_S)
        keep = tl.load(m_ptr + b * S + srow, mask=srow < S, other=0) != 0
        tile = tl.load(x_ptr + (b * S + srow)[:, None] * D + cols[None, :],
                       mask=keep[:, None] & cmask[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(tile, axis=0)
        cnt += keep.to(tl.float32)
    count = tl.maximum(tl.sum(cnt, axis=0), 1e-9)
    emb = acc / count
    if NORMALIZE:  # this program holds the whole row: normalize it here
        emb = emb / tl.maximum(tl.sqrt(tl.sum(emb * emb, axis=0)), 1e-12)
    tl.store(out_ptr + b * D + cols, emb, mask=cmask)


@triton.jit
def _normalize_kernel(out_ptr, D, BLOCK_D: tl.constexpr):
    row = out_ptr + tl.program_id(0).to(tl.int64) * D
    sq = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for start in range(0, D, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        v = tl.load(row + cols, mask=cols < D, other=0.0)
        sq += v * v
    inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(sq, axis=0)), 1e-12)
    for start in range(0, D, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        v = tl.load(row + cols, mask=cols < D, other=0.0)
        tl.store(row + cols, v * inv, mask=cols < D)


def masked_mean_pool_normalize(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    b, s, d = x.shape
    out = torch.empty((b, d), dtype=torch.float32, device=x.device)
    if out.numel() == 0:
        return out
    x = x.contiguous()
    m8 = mask.contiguous().view(torch.uint8)
    block_s = min(triton.next_power_of_2(max(s, 1)), 32)
    block_d = min(triton.next_power_of_2(d), max(128, 2048 // block_s))
    single = block_d >= d
    _pool_kernel[(b, triton.cdiv(d, block_d))](x, m8, out, s, d, BLOCK_S=block_s, BLOCK_D=block_d,
                                               NORMALIZE=single, num_warps=4)
    if not single:
        nb = min(triton.next_power_of_2(d), 4096)
        _normalize_kernel[(b,)](out, d, BLOCK_D=nb, num_warps=4)
    return out
