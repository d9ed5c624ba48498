"""Triton where with broadcasting: the three inputs are expanded (views with stride 0 on the
broadcast dimensions) to the 4-D output shape; each program takes a [BLOCK_R rows, BLOCK_C
columns] tile of the output, where a row is an index over the first three dimensions, and
selects between the strided x and y loads."""
import torch
import triton
import triton.language as tl


@triton.jit
def _where_kernel(c_ptr, x_ptr, y_ptr, out_ptr, R, C, D1, D2,
                  sc0, sc1, sc2, sc3, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rr < R)[:, None] & (rc < C)[None, :]
    i0 = (rr // (D1 * D2)).to(tl.int64)
    i1 = ((rr // D2) % D1).to(tl.int64)
    i2 = (rr % D2).to(tl.int64)
    col = rc.to(tl.int64)[None, :]
    cnd = tl.load(c_ptr + (i0 * sc0 + i1 * sc1 + i2 * sc2)[:, None] + col * sc3, mask=mask, other=0)
    xv = tl.load(x_ptr + (i0 * sx0 + i1 * sx1 + i2 * sx2)[:, None] + col * sx3, mask=mask & (cnd != 0))
    yv = tl.load(y_ptr + (i0 * sy0 + i1 * sy1 + i2 * sy2)[:, None] + col * sy3, mask=mask & (cnd == 0))
    out = tl.where(cnd != 0, xv, yv)
    tl.store(out_ptr + rr.to(tl.int64)[:, None] * C + col, out, mask=mask)


def expand_where(cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    shape = torch.broadcast_shapes(cond.shape, x.shape, y.shape)
    out = torch.empty(shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    shape4 = (1,) * (4 - len(shape)) + tuple(shape)
    c4 = cond.view(torch.uint8).expand(shape4)
    x4 = x.expand(shape4)
    y4 = y.expand(shape4)
    R = shape4[0] * shape4[1] * shape4[2]
    C = shape4[3]
    block_c = min(1024, triton.next_power_of_2(C))
    block_r = max(1, min(4096 // block_c, triton.next_power_of_2(R)))
    grid = (triton.cdiv(R, block_r), triton.cdiv(C, block_c))
    _where_kernel[grid](c4, x4, y4, out, R, C, shape4[1], shape4[2], *c4.stride(), *x4.stride(), *y4.stride(),
                        BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4)
    return out
