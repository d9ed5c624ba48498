"""Triton row sum: each program reduces BLOCK_R rows of the (rows, L) view, sweeping L in
BLOCK_L chunks into an fp32 accumulator tile."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_r, stride_c,
                BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < n_rows
    row_ptr = x_ptr + rows.to(tl.int64)[:, None] * stride_r
    acc = tl.zeros((BLOCK_R, BLOCK_L), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_L):
        cols = start + tl.arange(0, BLOCK_L)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(row_ptr + cols[None, :] * stride_c, mask=mask, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=1)
    tl.store(y_ptr + rows, total.to(y_ptr.dtype.element_ty), mask=row_mask)


def sum(x: torch.Tensor) -> torch.Tensor:  # noqa: A001 - the task's entry point is named `sum`
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)  # a view for contiguous and 2-D strided inputs
    n_rows = x2.shape[0]
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return y
    # ~4K elements per tile, laid along the contiguous axis so that loads coalesce: long
    # contiguous rows get wide tiles; column-major views (stride 1 across rows) get tall ones
    if x2.stride(1) != 1 and x2.stride(0) == 1:
        block_l = min(triton.next_power_of_2(n_cols), 32)
    else:
        block_l = min(triton.next_power_of_2(n_cols), 1024)
    block_r = max(1, min(4096 // block_l, triton.next_power_of_2(n_rows)))
    grid = (triton.cdiv(n_rows, block_r),)
    _sum_kernel[grid](x2, y, n_rows, n_cols, x2.stride(0), x2.stride(1),
                      BLOCK_R=block_r, BLOCK_L=block_l, num_warps=8)
    return y
