"""Triton instance norm: x is viewed as [R = N * C planes, S = H * W positions] through its strides;
all arithmetic is fp32 and every reduction has a fixed order (deterministic).
- Many planes: each program owns BLOCK_R planes and sweeps them three times in BLOCK_S chunks
  (mean, centred variance, normalized store).
- Few large planes: each plane is split over SPLIT programs. Pass 0 writes partial sums, pass 1
  partial centred sums of squares (every program re-derives the mean from the partial sums), and
  a last pass normalizes each chunk."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, C, S, sxn, sxc, sxs, eps,
                 BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    c = rows % C
    x_rows = x_ptr + (rows // C).to(tl.int64) * sxn + c.to(tl.int64) * sxc
    y_rows = y_ptr + rows.to(tl.int64) * S
    acc = tl.zeros((BLOCK_R, BLOCK_S), dtype=tl.float32)
    for start in range(0, S, BLOCK_S):
        s = start + tl.arange(0, BLOCK_S)
        mask = row_mask[:, None] & (s < S)[None, :]
        acc += tl.load(x_rows[:, None] + s[None, :] * sxs, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=1) / S
    acc = tl.zeros((BLOCK_R, BLOCK_S), dtype=tl.float32)
    for start in range(0, S, BLOCK_S):
        s = start + tl.arange(0, BLOCK_S)
        mask = row_mask[:, None] & (s < S)[None, :]
        x = tl.load(x_rows[:, None] + s[None, :] * sxs, mask=mask, other=0.0)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / S + eps)
    w = tl.load(w_ptr + c, mask=row_mask, other=0.0)
    b = tl.load(b_ptr + c, mask=row_mask, other=0.0)
    scale = rstd * w
    for start in range(0, S, BLOCK_S):
        s = start + tl.arange(0, BLOCK_S)
        mask = row_mask[:, None] & (s < S)[None, :]
        x = tl.load(x_rows[:, None] + s[None, :] * sxs, mask=mask, other=0.0)
        tl.store(y_rows[:, None] + s[None, :], (x - mean[:, None]) * scale[:, None] + b[:, None], mask=mask)


@triton.jit
def _split_stats_kernel(x_ptr, p0_ptr, p1_ptr, C, S, per_split, SPLIT, sxn, sxc, sxs,
                        PHASE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_SPLIT: tl.constexpr):
    r = tl.program_id(0)
    sp = tl.program_id(1)
    x_row = x_ptr + (r // C).to(tl.int64) * sxn + (r % C).to(tl.int64) * sxc
    lo = sp.to(tl.int64) * per_split
    if PHASE == 1:
        ks = tl.arange(0, BLOCK_SPLIT)
        mean = tl.sum(tl.load(p0_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / S
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, per_split, BLOCK):
        s = lo + start + tl.arange(0, BLOCK)
        mask = s < S
        x = tl.load(x_row + s * sxs, mask=mask, other=0.0)
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
def _split_norm_kernel(x_ptr, p0_ptr, p1_ptr, w_ptr, b_ptr, y_ptr, C, S, per_split, SPLIT, sxn, sxc, sxs, eps,
                       BLOCK: tl.constexpr, BLOCK_SPLIT: tl.constexpr):
    r = tl.program_id(0)
    sp = tl.program_id(1)
    c = r % C
    x_row = x_ptr + (r // C).to(tl.int64) * sxn + c.to(tl.int64) * sxc
    ks = tl.arange(0, BLOCK_SPLIT)
    mean = tl.sum(tl.load(p0_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / S
    var = tl.sum(tl.load(p1_ptr + r * SPLIT + ks, mask=ks < SPLIT, other=0.0), axis=0) / S
    scale = tl.load(w_ptr + c) / tl.sqrt(var + eps)
    b = tl.load(b_ptr + c)
    lo = sp.to(tl.int64) * per_split
    for start in range(0, per_split, BLOCK):
        s = lo + start + tl.arange(0, BLOCK)
        mask = s < S
        x = tl.load(x_row + s * sxs, mask=mask, other=0.0)
        tl.store(y_ptr + r.to(tl.int64) * S + s, (x - mean) * scale + b, mask=mask)


def instance_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    N, C = x.shape[0], x.shape[1]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    x3 = x.flatten(2)  # [N, C, S]: a view for NCHW and channels-last layouts
    S = x3.shape[2]
    R = N * C
    weight, bias = weight.contiguous(), bias.contiguous()
    split = min(256, triton.cdiv(S, 16384), max(1, 1024 // R))
    if split <= 1:
        block_s = min(2048, triton.next_power_of_2(S))
        block_r = max(1, min(2048 // block_s, triton.next_power_of_2(R)))
        _rows_kernel[(triton.cdiv(R, block_r),)](x3, weight, bias, y, R, C, S, *x3.stride(), eps,
                                                 BLOCK_R=block_r, BLOCK_S=block_s, num_warps=8)
        return y
    block = 2048
    per_split = triton.cdiv(triton.cdiv(S, split), block) * block
    split = triton.cdiv(S, per_split)
    p0 = torch.empty((R, split), dtype=torch.float32, device=x.device)
    p1 = torch.empty((R, split), dtype=torch.float32, device=x.device)
    bsplit = triton.next_power_of_2(split)
    for phase in (0, 1):
        _split_stats_kernel[(R, split)](x3, p0, p1, C, S, per_split, split, *x3.stride(), PHASE=phase,
                                        BLOCK=block, BLOCK_SPLIT=bsplit, num_warps=8)
    _split_norm_kernel[(R, split)](x3, p0, p1, weight, bias, y, C, S, per_split, split, *x3.stride(), eps,
                                   BLOCK=block, BLOCK_SPLIT=bsplit, num_warps=8)
    return y
