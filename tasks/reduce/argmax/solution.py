"""Triton argmax over one dim: rows x L view (other dims collapsed to at most two strided levels). Each
program sweeps its BLOCK_R rows in BLOCK_L chunks; per chunk it finds the chunk maximum and the first
column holding it, and takes it only when strictly larger than the running best (so the first
occurrence wins across chunks). The first NaN index is tracked separately and wins at the end."""
import torch
import triton
import triton.language as tl

BIG = 2147483647


@triton.jit
def _row_base(rows, R1, s0, s1, TWO_LEVEL: tl.constexpr):
    """Offset (int64) of the first element of each row."""
    if TWO_LEVEL:
        return (rows // R1).to(tl.int64) * s0 + (rows % R1).to(tl.int64) * s1
    else:
        return rows.to(tl.int64) * s1


@triton.jit
def _argmax_kernel(x_ptr, out_ptr, R, R1, s0, s1, L, sl, TWO_LEVEL: tl.constexpr, BLOCK_R: tl.constexpr,
                   BLOCK_L: tl.constexpr, BIG: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    base = _row_base(rows, R1, s0, s1, TWO_LEVEL)
    best_v = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    best_i = tl.full((BLOCK_R,), BIG, tl.int32)
    nan_i = tl.full((BLOCK_R,), BIG, tl.int32)
    for start in range(0, L, BLOCK_L):
        cols = start + tl.arange(0, BLOCK_L)
        mask = row_mask[:, None] & (cols < L)[None, :]
        x = tl.load(x_ptr + base[:, None] + cols.to(tl.int64)[None, :] * sl, mask=mask,
                    other=float("-inf")).to(tl.float32)
        is_nan = x != x
        nan_i = tl.minimum(nan_i, tl.min(tl.where(is_nan, cols[None, :], BIG), axis=1))
        valid = mask & (x == x)
        v = tl.where(valid, x, float("-inf"))
        cmax = tl.max(v, axis=1)
        cidx = tl.min(tl.where(valid & (v == cmax[:, None]), cols[None, :], BIG), axis=1)
        take = (cidx < BIG) & ((cmax > best_v) | (best_i == BIG))
        best_v = tl.where(take, cmax, best_v)
        best_i = tl.where(take, cidx, best_i)
    idx = tl.where(nan_i < BIG, nan_i, best_i)
    tl.store(out_ptr + rows, idx.to(tl.int64), mask=row_mask)


def _rows(t: torch.Tensor, dim: int):
    """Describe `t` as R rows of length L = t.shape[dim]: row r starts at
    (r // R1) * s0 + (r % R1) * s1 (rows in row-major order of the other dims) and its elements
    are sl apart. The other dims are collapsed to at most two levels (size-1 dims dropped,
    neighbours merged when their strides allow); a layout needing more is made contiguous."""
    tm = t.movedim(dim, -1)
    sizes, strides = [], []
    for size, stride in zip(tm.shape[:-1], tm.stride()[:-1]):
        if size == 1:
            continue
        if sizes and strides[-1] == stride * size:
            sizes[-1] *= size
            strides[-1] = stride
        else:
            sizes.append(size)
            strides.append(stride)
    if len(sizes) > 2:
        tm = tm.contiguous()
        sizes, strides = [tm.numel() // tm.shape[-1]], [tm.shape[-1]]
    sizes = [1] * (2 - len(sizes)) + sizes
    strides = [0] * (2 - len(strides)) + strides
    return tm, sizes[0] * sizes[1], sizes[1], strides[0], strides[1], tm.stride(-1)


def _tiles(R: int, R1: int, s0: int, s1: int, L: int, sl: int, budget: int = 4096):
    """Tile (BLOCK_R rows x BLOCK_L elements) laid along the contiguous axis: wide along L when a
    row is contiguous, tall across rows when rows are adjacent in memory (reducing a non-last dim)."""
    rows_adjacent = (R1 > 1 and s1 == 1) or (R1 == 1 and s0 == 1)
    if sl != 1 and rows_adjacent:
        r2 = triton.next_power_of_2(R)
        block_r = r2 if r2 <= 256 else min(max(16, r2 // 256), 256)  # >= 256 programs when R is large
        block_l = min(triton.next_power_of_2(L), max(16, budget // block_r))
    else:
        block_l = min(triton.next_power_of_2(L), 1024)
        block_r = max(1, min(budget // block_l, triton.next_power_of_2(R)))
    return block_r, block_l


def argmax(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    if dim < 0:
        dim += x.dim()
    L = x.shape[dim]
    out_shape = list(x.shape)
    if keepdim:
        out_shape[dim] = 1
    else:
        out_shape.pop(dim)
    out = torch.empty(out_shape, dtype=torch.int64, device=x.device)
    xm, R, R1, s0, s1, sl = _rows(x, dim)
    if R == 0:
        return out
    block_r, block_l = _tiles(R, R1, s0, s1, L, sl)
    _argmax_kernel[(triton.cdiv(R, block_r),)](xm, out, R, R1, s0, s1, L, sl, TWO_LEVEL=R1 < R,
                                               BLOCK_R=block_r, BLOCK_L=block_l, BIG=BIG, num_warps=8)
    return out
