"""Triton fused affine_grid + bilinear grid_sample (zeros padding, align_corners=False): grid =
(n * pixel block, channel block). Each program loads its sample's 2x3 matrix, computes the
normalized source coordinates of BLOCK_P output pixels on the fly, forms the four corners,
validity masks and weights in fp32, and blends the corners of BLOCK_C channels read through the
strides of x. The sampling grid is never written to memory."""
import torch
import triton
import triton.language as tl


@triton.jit
def _affine_sample_kernel(x_ptr, t_ptr, out_ptr, C, H, W, OH, OW, n_pblocks, sxn, sxc, sxh, sxw,
                          BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    n = (pid // n_pblocks).to(tl.int64)
    P = OH * OW
    rp = (pid % n_pblocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    p_mask = rp < P
    c_mask = rc < C
    t = t_ptr + n * 6
    t00 = tl.load(t)
    t01 = tl.load(t + 1)
    t02 = tl.load(t + 2)
    t10 = tl.load(t + 3)
    t11 = tl.load(t + 4)
    t12 = tl.load(t + 5)
    xn = (2.0 * (rp % OW).to(tl.float32) + 1.0) / OW - 1.0
    yn = (2.0 * (rp // OW).to(tl.float32) + 1.0) / OH - 1.0
    gx = t00 * xn + t01 * yn + t02
    gy = t10 * xn + t11 * yn + t12
    ix = ((gx + 1.0) * W - 1.0) / 2.0
    iy = ((gy + 1.0) * H - 1.0) / 2.0
    fx0 = tl.floor(ix)
    fy0 = tl.floor(iy)
    wx1 = ix - fx0
    wy1 = iy - fy0
    wx0 = 1.0 - wx1
    wy0 = 1.0 - wy1
    x0 = fx0.to(tl.int32)
    y0 = fy0.to(tl.int32)
    x1 = x0 + 1
    y1 = y0 + 1
    vx0 = (x0 >= 0) & (x0 < W)
    vx1 = (x1 >= 0) & (x1 < W)
    vy0 = (y0 >= 0) & (y0 < H)
    vy1 = (y1 >= 0) & (y1 < H)
    base = x_ptr + n * sxn + rc.to(tl.int64)[None, :] * sxc
    cm = c_mask[None, :]
    v00 = tl.load(base + (y0 * sxh + x0 * sxw)[:, None], mask=(p_mask & vy0 & vx0)[:, None] & cm, other=0.0)
    v01 = tl.load(base + (y0 * sxh + x1 * sxw)[:, None], mask=(p_mask & vy0 & vx1)[:, None] & cm, other=0.0)
    v10 = tl.load(base + (y1 * sxh + x0 * sxw)[:, None], mask=(p_mask & vy1 & vx0)[:, None] & cm, other=0.0)
    v11 = tl.load(base + (y1 * sxh + x1 * sxw)[:, None], mask=(p_mask & vy1 & vx1)[:, None] & cm, other=0.0)
    out = ((wy0 * wx0)[:, None] * v00 + (wy0 * wx1)[:, None] * v01
           + (wy1 * wx0)[:, None] * v10 + (wy1 * wx1)[:, None] * v11)
    o = out_ptr + n * C * P + rc.to(tl.int64)[None, :] * P + rp[:, None]
    tl.store(o, out, mask=p_mask[:, None] & cm)


def grid_sample_affine(x: torch.Tensor, theta: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    N, C, H, W = x.shape
    out = torch.empty((N, C, out_h, out_w), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    theta = theta.contiguous()
    P = out_h * out_w
    block_c = min(16, triton.next_power_of_2(C))
    block_p = max(16, min(4096 // block_c, triton.next_power_of_2(P)))
    n_pblocks = triton.cdiv(P, block_p)
    _affine_sample_kernel[(N * n_pblocks, triton.cdiv(C, block_c))](x, theta, out, C, H, W, out_h, out_w, n_pblocks,
                                                                    *x.stride(), BLOCK_P=block_p, BLOCK_C=block_c,
                                                                    num_warps=4)
    return out
