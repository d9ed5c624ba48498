"""Triton group norm: x is viewed as [N, C, S] (S = H * W) and each (sample, group) is a row of
E = C / G * S elements; element e of group g is channel g * C/G + e // S at position e % S. All
arithmetic is fp32 and every reduction has a fixed order (deterministic).
- Many groups: each program owns BLOCK_R rows and sweeps them three times in BLOCK_E chunks
  (mean, centred variance, normalized store).
- Few large groups: each row is split over SPLIT programs. Pass 0 writes partial sums, pass 1
  partial centred sums of squares (each program re-derives the mean from the partials), and a
  last pass normalizes each chunk."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, G, Cg, S, E, sxn, sxc, sxs, eps,
                 BLOCK_R: tl.constexpr, BLOCK_E: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    g = rows % G
    x_rows = x_ptr + (rows // G).to(tl.int64) * sxn + (g * Cg).to(tl.int64) * sxc  # first channel of the group
    y_rows = y_ptr + rows.to(tl.int64) * E  # contiguous output: the rows of a sample are adjacent
    acc = tl.zeros((BLOCK_R, BLOCK_E), dtype=tl.float32)
    for start in range(0, E, BLOCK_E):
        e = start + tl.arange(0, BLOCK_E)
        mask = row_mask[:, None] & (e < E)[None, :]
        off = (e // S).to(tl.int64) * sxc + (e % S) * sxs
        acc += tl.load(x_rows[:, None] + off[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / E
    acc = tl.zeros((BLOCK_R, BLOCK_E), dtype=tl.float32)
    for start in range(0, E, BLOCK_E):
        e = start + tl.arange(0, BLOCK_E)
        mask = row_mask[:, None] & (e < E)[None, :]
        off = (e // S).to(tl.int64) * sxc + (e % S) * sxs
        x = tl.load(x_rows[:, None] + off[None, :], mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / E + eps)
    for start in range(0, E, BLOCK_E):
        e = start + tl.arange(0, BLOCK_E)
        mask = row_mask[:, None] & (e < E)[None, :]
        off = (e // S).to(tl.int64) * sxc + (e % S) * sxs
        x = tl.load(x_rows[:, None] + off[None, :], mask=mask, other=0.0).to(tl.float32)
        ch = g[:, None] * Cg + (e // S)[None, :]
        w = tl.load(w_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w + b
        tl.store(y_rows[:, None] + e[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _split_stats_kernel(x_ptr, p0_ptr, p1_ptr, G, Cg, S, E, per_split, SPLIT, sxn, sxc, sxs,
                        PHASE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_SPLIT: tl.constexpr):
    r = tl.program_id(0)
    sp = tl.program_id(1)
    x_row = x_ptr + (r // G).to(tl.int64) * sxn + ((r % G) * Cg).to(tl.int64) * sxc
    lo = sp.to(tl.int64) * per_split
    if PHASE == 1:
        ks = tl.arange(0, BLOCK_SPLIT)
        mean = tl.sum(tl.load(p0_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / E
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, per_split, BLOCK):
        e = lo + start + tl.arange(0, BLOCK)
        mask = e < E
        x = tl.load(x_row + (e // S) * sxc + (e % S) * sxs, mask=mask, other=0.0).to(tl.float32)
        if PHASE == 0:
            acc += x
        else:
            d = tl.where(mask, x - mean, 0.0)
            acc += d * d
    if PHASE == 0:
        tl.store(p0_ptr + r * SPLIT + sp, tl.sum(acc, axis=0))
    else:
        tl.store(p1_ptr + r * SPLIT + sp, tl.sum(acc, axis=0))


@triton.jit
def _split_norm_kernel(x_ptr, p0_ptr, p1_ptr, w_ptr, b_ptr, y_ptr, G, Cg, S, E, per_split, SPLIT,
                       sxn, sxc, sxs, eps, BLOCK: tl.constexpr, BLOCK_SPLIT: tl.constexpr):
    r = tl.program_id(0)
    sp = tl.program_id(1)
    g = r % G
    x_row = x_ptr + (r // G).to(tl.int64) * sxn + (g * Cg).to(tl.int64) * sxc
    ks = tl.arange(0, BLOCK_SPLIT)
    mean = tl.sum(tl.load(p0_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / E
    var = tl.sum(tl.load(p1_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / E
    rstd = 1.0 / tl.sqrt(var + eps)
    lo = sp.to(tl.int64) * per_split
    for start in range(0, per_split, BLOCK):
        e = lo + start + tl.arange(0, BLOCK)
        mask = e < E
        x = tl.load(x_row + (e // S) * sxc + (e % S) * sxs, mask=mask, other=0.0).to(tl.float32)
        ch = g * Cg + e // S
        w = tl.load(w_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + r.to(tl.int64) * E + e, y.to(y_ptr.dtype.element_ty), mask=mask)


def group_norm(x: torch.Tensor, num_groups: int, weight: torch.Tensor, bias: torch.Tensor,
               eps: float = 1e-5) -> torch.Tensor:
    N, C = x.shape[0], x.shape[1]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    x3 = x.flatten(2)  # [N, C, S]: a view for NCHW and channels-last layouts
    S = x3.shape[2]
    G = num_groups
    Cg = C // G
    E = Cg * S
    R = N * G
    weight, bias = weight.contiguous(), bias.contiguous()
    split = min(256, triton.cdiv(E, 16384), max(1, 1024 // R))
    if split <= 1:
        block_e = min(2048, triton.next_power_of_2(E))
        block_r = max(1, min(2048 // block_e, triton.next_power_of_2(R)))
        _rows_kernel[(triton.cdiv(R, block_r),)](x3, weight, bias, y, R, G, Cg, S, E, *x3.stride(), eps,
                                                 BLOCK_R=block_r, BLOCK_E=block_e, num_warps=8)
        return y
    block = 2048
    per_split = triton.cdiv(triton.cdiv(E, split), block) * block
    split = triton.cdiv(E, per_split)
    p0 = torch.empty((R, split), dtype=torch.float32, device=x.device)
    p1 = torch.empty((R, split), dtype=torch.float32, device=x.device)
    bsplit = triton.next_power_of_2(split)
    for phase in (0, 1):
        _split_stats_kernel[(R, split)](x3, p0, p1, G, Cg, S, E, per_split, split, *x3.stride(), PHASE=phase,
                                        BLOCK=block, BLOCK_SPLIT=bsplit, num_warps=8)
    _split_norm_kernel[(R, split)](x3, p0, p1, weight, bias, y, G, Cg, S, E, per_split, split, *x3.stride(), eps,
                                   BLOCK=block, BLOCK_SPLIT=bsplit, num_warps=8)
    return y
