"""Triton adaptive_avg_pool2d: each program owns a tile of BLOCK_R (n, c) rows x BLOCK_O output cells
and sums the cells' windows - whose bounds follow PyTorch's floor/ceil formulas per cell - by sweeping
the flattened (kh, kw) positions of the largest window in BLOCK_K chunks, masking each cell to its own
window (adaptive windows differ in size by at most one or two). The 3-D tile is laid along the
contiguous axis: window positions for NCHW inputs, channels for channels-last views. Sums are
float32, divided once by the cell's window size."""
import torch
import triton
import triton.language as tl


@triton.jit
def _adaptive_avg_pool2d_kernel(x_ptr, out_ptr, R, C, H, W, OH, OW, sn, sc, sh, sw, KH_MAX, KW_MAX,
                                BLOCK_R: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cells = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
    row_mask = rows < R
    cell_mask = cells < OH * OW
    i = cells // OW
    j = cells % OW
    h0 = (i * H) // OH
    h1 = ((i + 1) * H + OH - 1) // OH
    w0 = (j * W) // OW
    w1 = ((j + 1) * W + OW - 1) // OW
    row_off = ((rows // C) * sn + (rows % C) * sc)[:, None, None]
    base_mask = row_mask[:, None, None] & cell_mask[None, :, None]
    acc = tl.zeros((BLOCK_R, BLOCK_O, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, KH_MAX * KW_MAX, BLOCK_K):  # flattened (kh, kw) positions of the largest window
        k = k0 + tl.arange(0, BLOCK_K)
        h = h0[:, None] + (k // KW_MAX)[None, :]
        w = w0[:, None] + (k % KW_MAX)[None, :]
        inside = (h < h1[:, None]) & (w < w1[:, None]) & (k < KH_MAX * KW_MAX)[None, :]
        off = h.to(tl.int64) * sh + w.to(tl.int64) * sw
        v = tl.load(x_ptr + row_off + off[None, :, :], mask=base_mask & inside[None, :, :], other=0.0)
        acc += v.to(tl.float32)
    count = ((h1 - h0) * (w1 - w0)).to(tl.float32)
    mean = tl.sum(acc, axis=2) / count[None, :]
    out_mask = row_mask[:, None] & cell_mask[None, :]
    tl.store(out_ptr + rows[:, None] * (OH * OW) + cells[None, :], mean.to(out_ptr.dtype.element_ty),
             mask=out_mask)


def adaptive_avg_pool2d(x: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
    N, C, H, W = x.shape
    OH, OW = int(output_size[0]), int(output_size[1])
    out = torch.empty((N, C, OH, OW), dtype=x.dtype, device=x.device)
    R = N * C
    if out.numel() == 0:
        return out
    kh_max = max(-(-(i + 1) * H // OH) - (i * H // OH) for i in range(OH))
    kw_max = max(-(-(j + 1) * W // OW) - (j * W // OW) for j in range(OW))
    cells = OH * OW
    window = kh_max * kw_max
    if x.stride(1) == 1 and x.stride(3) != 1:  # channels-last view: lay the tile across channels
        block_r = min(triton.next_power_of_2(R), 64)
        block_k = min(triton.next_power_of_2(window), 16)
        block_o = max(1, min(4096 // (block_r * block_k), triton.next_power_of_2(cells)))
    else:  # NCHW-like: window columns (and neighbouring cells) are adjacent in memory
        block_k = min(triton.next_power_of_2(window), 256)
        block_o = max(1, min(1024 // block_k, triton.next_power_of_2(cells)))
        block_r = max(1, min(4096 // (block_o * block_k), triton.next_power_of_2(R)))
    grid = (triton.cdiv(R, block_r), triton.cdiv(cells, block_o))
    _adaptive_avg_pool2d_kernel[grid](x, out, R, C, H, W, OH, OW, *x.stride(), kh_max, kw_max,
                                      BLOCK_R=block_r, BLOCK_O=block_o, BLOCK_K=block_k, num_warps=8)
    return out
