"""Triton GroupNorm + SiLU in three launches. A group of one sample is a contiguous span of
C/G * H * W elements in NCHW. (1) A grid of (sample * group, split) programs reduces one chunk of
the span each to (sum, M2 around the chunk mean) in float32, so small batches still fill the GPU.
(2) Blocks of groups merge their chunk statistics with Chan's formula into (mean, rstd); with a
single chunk per group, (1) writes (mean, rstd) itself and (2) is skipped.
(3) A flat elementwise pass normalizes, applies the channel's affine and SiLU, and stores once."""
import torch
import triton
import triton.language as tl


@triton.jit
def _to_out(v, dtype: tl.constexpr):
    """fp32 -> dtype, round-to-nearest-even (bf16 rounded on the bits: the CPU interpreter would
    truncate)."""
    if dtype == tl.bfloat16:
        u = v.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        v = u.to(tl.float32, bitcast=True)
    return v.to(dtype)


@triton.jit
def _gn_partial_kernel(x_ptr, ws_ptr, st_ptr, GSIZE, CHUNK, SPLITS, eps, SINGLE: tl.constexpr,
                       BLOCK: tl.constexpr):
    grp = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, GSIZE)
    base = x_ptr + grp * GSIZE
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < hi, other=0.0).to(tl.float32)
    s = tl.sum(acc, axis=0)
    mean = s / (hi - lo).to(tl.float32)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hi
        d = tl.where(m, tl.load(base + offs, mask=m, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    if SINGLE:  # one chunk covers the group: finish the statistics here
        tl.store(st_ptr + grp * 2, mean)
        tl.store(st_ptr + grp * 2 + 1, 1.0 / tl.sqrt(tl.sum(acc, axis=0) / GSIZE + eps))
    else:
        out = ws_ptr + (grp * SPLITS + split) * 2
        tl.store(out, s)
        tl.store(out + 1, tl.sum(acc, axis=0))


@triton.jit
def _gn_finalize_kernel(ws_ptr, st_ptr, NG, GSIZE, CHUNK, SPLITS, eps, BLOCK_G: tl.constexpr,
                        BLOCK_S: tl.constexpr):
    grp = (tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)).to(tl.int64)
    sp = tl.arange(0, BLOCK_S)
    gmask = grp < NG
    smask = gmask[:, None] & (sp[None, :] < SPLITS)
    wsp = ws_ptr + (grp[:, None] * SPLITS + sp[None, :]) * 2
    s = tl.load(wsp, mask=smask, other=0.0)
    m2 = tl.load(wsp + 1, mask=smask, other=0.0)
    cnt = tl.minimum(GSIZE - sp * CHUNK, CHUNK).to(tl.float32)
    cnt = tl.where(sp < SPLITS, cnt, 1.0)
    mean = tl.sum(s, axis=1) / GSIZE
    dm = tl.where(smask, s / cnt[None, :] - mean[:, None], 0.0)
    var = (tl.sum(m2, axis=1) + tl.sum(cnt[None, :] * dm * dm, axis=1)) / GSIZE
    tl.store(st_ptr + grp * 2, mean, mask=gmask)
    tl.store(st_ptr + grp * 2 + 1, 1.0 / tl.sqrt(var + eps), mask=gmask)


@triton.jit
def _gn_apply_kernel(x_ptr, st_ptr, w_ptr, b_ptr, out_ptr, n, C, HW, GSIZE, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    grp = offs // GSIZE
    c = (offs // HW) % C
    mean = tl.load(st_ptr + grp * 2, mask=mask, other=0.0)
    rstd = tl.load(st_ptr + grp * 2 + 1, mask=mask, other=0.0)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    out = y / (1.0 + tl.exp(-y))
    tl.store(out_ptr + offs, _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def group_norm_silu(x: torch.Tensor, num_groups: int, weight: torch.Tensor, bias: torch.Tensor,
                    eps: float = 1e-5) -> torch.Tensor:
    n_, c, h, w = x.shape
    out = torch.empty((n_, c, h, w), dtype=x.dtype, device=x.device)
    n = out.numel()
    if n == 0:
        return out
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    hw = h * w
    ng = n_ * num_groups
    gsize = (c // num_groups) * hw
    splits = max(1, min(triton.cdiv(512, ng), triton.cdiv(gsize, 256), 64))
    chunk = triton.cdiv(gsize, splits)
    splits = triton.cdiv(gsize, chunk)
    block = min(2048, triton.next_power_of_2(chunk))
    ws = torch.empty((ng, splits, 2), dtype=torch.float32, device=x.device)
    stats = torch.empty((ng, 2), dtype=torch.float32, device=x.device)
    _gn_partial_kernel[(ng, splits)](x, ws, stats, gsize, chunk, splits, eps, SINGLE=splits == 1, BLOCK=block,
                                     num_warps=4)
    if splits > 1:
        block_g = min(64, triton.next_power_of_2(ng))
        _gn_finalize_kernel[(triton.cdiv(ng, block_g),)](ws, stats, ng, gsize, chunk, splits, eps,
                                                         BLOCK_G=block_g, BLOCK_S=triton.next_power_of_2(splits),
                                                         num_warps=4)
    block2 = min(4096, triton.next_power_of_2(n))
    _gn_apply_kernel[(triton.cdiv(n, block2),)](x, stats, weight, bias, out, n, c, hw, gsize, BLOCK=block2,
                                                num_warps=8)
    return out
