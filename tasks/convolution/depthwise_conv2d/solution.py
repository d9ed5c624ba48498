"""Triton depthwise conv2d: grid = (image, output-pixel block, channel block). Each program owns a
[BLOCK_P pixels x BLOCK_C channels] output tile; for every filter tap (unrolled) it loads one
weight per channel and the shifted input tile (masked to zero outside the image, read through
the strides, so NCHW and channels-last both work) and accumulates in fp32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _dwconv_kernel(x_ptr, w_ptr, b_ptr, out_ptr, C, H, W, OH, OW, stride, padding, sxn, sxc, sxh, sxw,
                   KH: tl.constexpr, KW: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    rp = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    p_mask = rp < OH * OW
    c_mask = rc < C
    ih0 = (rp // OW) * stride - padding
    iw0 = (rp % OW) * stride - padding
    x_base = x_ptr + n * sxn + rc.to(tl.int64)[None, :] * sxc
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for kh in tl.static_range(KH):
        ih = ih0 + kh
        row_ok = p_mask & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = iw0 + kw
            ok = row_ok & (iw >= 0) & (iw < W)
            wt = tl.load(w_ptr + rc * (KH * KW) + (kh * KW + kw), mask=c_mask, other=0.0)
            xv = tl.load(x_base + (ih * sxh + iw * sxw)[:, None], mask=ok[:, None] & c_mask[None, :], other=0.0)
            acc += xv * wt[None, :]
    acc += tl.load(b_ptr + rc, mask=c_mask, other=0.0)[None, :]
    out = out_ptr + n * C * OH * OW + rc.to(tl.int64)[None, :] * (OH * OW) + rp[:, None]
    tl.store(out, acc, mask=p_mask[:, None] & c_mask[None, :])


def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int = 1,
                     padding: int = 0) -> torch.Tensor:
    N, C, H, W = x.shape
    KH, KW = weight.shape[2], weight.shape[3]
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    out = torch.empty((N, C, OH, OW), dtype=torch.float32, device=x.device)
    if out.numel() == 0:
        return out
    weight, bias = weight.contiguous(), bias.contiguous()
    if x.stride(1) == 1:  # channels-last: channels are the contiguous axis
        block_c = min(64, triton.next_power_of_2(C))
        block_p = max(1, min(2048 // block_c, triton.next_power_of_2(OH * OW)))
    else:
        block_p = min(512, triton.next_power_of_2(OH * OW))
        block_c = max(1, min(2048 // block_p, triton.next_power_of_2(C)))
    grid = (N, triton.cdiv(OH * OW, block_p), triton.cdiv(C, block_c))
    _dwconv_kernel[grid](x, weight, bias, out, C, H, W, OH, OW, stride, padding, *x.stride(),
                         KH=KH, KW=KW, BLOCK_P=block_p, BLOCK_C=block_c, num_warps=4)
    return out
