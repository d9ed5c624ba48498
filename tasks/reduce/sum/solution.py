"""Triton row sum over the last dimension of a (rows, L) view. Each program reduces BLOCK_R rows
over one slice of L in BLOCK_L chunks into an fp32 tile. When there are too few row blocks to
fill the GPU (few long rows), L is split across programs into fp32 partial sums, which the same
kernel then adds up in a second, fixed-order pass (deterministic, no atomics)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_r, stride_c, cols_per_split,
                BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < n_rows
    row_ptr = x_ptr + rows.to(tl.int64)[:, None] * stride_r
    lo = tl.program_id(1) * cols_per_split
    hi = tl.minimum(lo + cols_per_split, n_cols)
    acc = tl.zeros((BLOCK_R, BLOCK_L), dtype=tl.float32)
    for start in range(lo, hi, BLOCK_L):
        cols = start + tl.arange(0, BLOCK_L)
        mask = row_mask[:, None] & (cols < hi)[None, :]
        x = tl.load(row_ptr + cols[None, :] * stride_c, mask=mask, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=1)
    # output row of this split: out[split, rows] (a plain [rows] vector when not split)
    tl.store(out_ptr + tl.program_id(1) * n_rows + rows, total.to(out_ptr.dtype.element_ty), mask=row_mask)


def _launch(x2: torch.Tensor, out: torch.Tensor, split: int, block_r: int, block_l: int) -> None:
    n_rows, n_cols = x2.shape
    cols_per_split = triton.cdiv(triton.cdiv(n_cols, split), block_l) * block_l
    grid = (triton.cdiv(n_rows, block_r), triton.cdiv(n_cols, cols_per_split))
    _sum_kernel[grid](x2, out, n_rows, n_cols, x2.stride(0), x2.stride(1), cols_per_split,
                      BLOCK_R=block_r, BLOCK_L=block_l, num_warps=4 if block_r * block_l <= 2048 else 8)


def _tile(x2: torch.Tensor) -> tuple[int, int]:
    """~4K-element tiles laid along the contiguous axis, so that loads coalesce."""
    n_rows, n_cols = x2.shape
    if x2.stride(1) != 1 and x2.stride(0) == 1:  # column-major view: tall, narrow tiles
        block_l = min(triton.next_power_of_2(n_cols), 32)
    else:
        block_l = min(triton.next_power_of_2(n_cols), 1024)
    block_r = max(1, min(4096 // block_l, triton.next_power_of_2(n_rows)))
    return block_r, block_l


def sum(x: torch.Tensor) -> torch.Tensor:  # noqa: A001 - the task's entry point is named `sum`
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)  # a view for contiguous and 2-D strided inputs
    n_rows = x2.shape[0]
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return y
    block_r, block_l = _tile(x2)
    row_blocks = triton.cdiv(n_rows, block_r)
    # aim for >= ~1024 programs, but give each split at least 8 chunks of work
    split = min(triton.cdiv(1024, row_blocks), triton.cdiv(n_cols, 8 * block_l)) if row_blocks < 256 else 1
    if split <= 1:
        _launch(x2, y, 1, block_r, block_l)
        return y
    partial = torch.empty((split, n_rows), dtype=torch.float32, device=x.device)
    _launch(x2, partial, split, block_r, block_l)
    split = triton.cdiv(n_cols, triton.cdiv(triton.cdiv(n_cols, split), block_l) * block_l)  # splits used
    partial_t = partial[:split].t()  # [rows, split] view: sum its last dimension
    _launch(partial_t, y, 1, *_tile(partial_t))
    return y
