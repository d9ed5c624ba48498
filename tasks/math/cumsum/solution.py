"""Triton cumsum along one dim: input and output are described as rows x L (the other dims collapsed to
at most two strided levels, so views are read in place). Each program scans BLOCK_R rows in BLOCK_L
chunks with tl.cumsum in float32 and carries the running row totals between chunks."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_base(rows, R1, s0, s1, TWO_LEVEL: tl.constexpr):
    """Offset (int64) of the first element of each row."""
    if TWO_LEVEL:
        return (rows // R1).to(tl.int64) * s0 + (rows % R1).to(tl.int64) * s1
    else:
        return rows.to(tl.int64) * s1


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, R, L, R1, s0, s1, sl, oR1, os0, os1, osl, TWO_LEVEL: tl.constexpr,
                   OUT_TWO_LEVEL: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < R
    base = _row_base(rows, R1, s0, s1, TWO_LEVEL)
    obase = _row_base(rows, oR1, os0, os1, OUT_TWO_LEVEL)
    carry = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        cols = (start + tl.arange(0, BLOCK_L)).to(tl.int64)
        mask = row_mask[:, None] & (cols < L)[None, :]
        x = tl.load(x_ptr + base[:, None] + cols[None, :] * sl, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(out_ptr + obase[:, None] + cols[None, :] * osl, y.to(out_ptr.dtype.element_ty), mask=mask)
        # Next carry = last column of y (masked tail columns add 0). Not `carry += tl.sum(x, axis=1)`:
        # on float32 input Triton 3.6's OptimizeThreadLocality pass matches that "loop-carried sum of a
        # loaded tile" and asserts (make_ttgir: PassManager::run failed) since carry is unused after the
        # loop; a carry also read inside the loop would not be supported by that rewrite either.
        carry = tl.sum(tl.where((tl.arange(0, BLOCK_L) == BLOCK_L - 1)[None, :], y, 0.0), axis=1)


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


def cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    if dim < 0:
        dim += x.dim()
    L = x.shape[dim]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    xm, R, R1, s0, s1, sl = _rows(x, dim)
    om, _, oR1, os0, os1, osl = _rows(out, dim)
    if R == 0 or L == 0:
        return out
    block_r, block_l = _tiles(R, R1, s0, s1, L, sl, budget=2048)
    _cumsum_kernel[(triton.cdiv(R, block_r),)](xm, om, R, L, R1, s0, s1, sl, oR1, os0, os1, osl,
                                               TWO_LEVEL=R1 < R, OUT_TWO_LEVEL=oR1 < R, BLOCK_R=block_r,
                                               BLOCK_L=block_l, num_warps=8)
    return out
