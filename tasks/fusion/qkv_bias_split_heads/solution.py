"""Triton QKV bias + head split: one output buffer [3, B, H, S, Dh] whose three slices are returned
as q, k, v. A grid of (token block, feature block) programs reads [BLOCK_T, BLOCK_F] tiles of the
fused rows (row stride may exceed 3E), adds the bias, and scatters each feature to its
(part, head, dim) place; stores stay contiguous over runs of Dh features."""
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
def _split_heads_kernel(x_ptr, b_ptr, out_ptr, NT, S, H, DH, E3, sxb, sxs, part_numel,
                        BLOCK_T: tl.constexpr, BLOCK_F: tl.constexpr):
    toks = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    feats = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = feats < E3
    mask = (toks[:, None] < NT) & fmask[None, :]
    bi = toks // S
    si = toks % S
    x = tl.load(x_ptr + (bi * sxb + si * sxs)[:, None] + feats[None, :], mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(b_ptr + feats, mask=fmask, other=0.0).to(tl.float32)
    y = _to_out(x + bias[None, :], out_ptr.dtype.element_ty)
    e = E3 // 3
    part = feats // e
    hi = (feats % e) // DH
    di = feats % DH
    dst = part.to(tl.int64)[None, :] * part_numel + ((bi[:, None] * H + hi[None, :]) * S + si[:, None]) * DH \
        + di[None, :]
    tl.store(out_ptr + dst, y, mask=mask)


def qkv_bias_split_heads(qkv: torch.Tensor, bias: torch.Tensor,
                         num_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, s, e3 = qkv.shape
    dh = e3 // (3 * num_heads)
    out = torch.empty((3, b, num_heads, s, dh), dtype=qkv.dtype, device=qkv.device)
    if out.numel() == 0:
        return out[0], out[1], out[2]
    if qkv.stride(2) != 1:
        qkv = qkv.contiguous()
    bias = bias.contiguous()
    nt = b * s
    block_f = min(triton.next_power_of_2(e3), 1024)
    block_t = min(triton.next_power_of_2(nt), max(1, 4096 // block_f))
    grid = (triton.cdiv(nt, block_t), triton.cdiv(e3, block_f))
    _split_heads_kernel[grid](qkv, bias, out, nt, s, num_heads, dh, e3, qkv.stride(0), qkv.stride(1),
                              b * num_heads * s * dh, BLOCK_T=block_t, BLOCK_F=block_f, num_warps=8)
    return out[0], out[1], out[2]
