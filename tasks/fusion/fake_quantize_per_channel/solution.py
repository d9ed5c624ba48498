"""Triton per-channel fake quantization: 2-D tiles of [BLOCK_M rows, BLOCK_N columns]; each row's
scale and zero point are loaded once per tile. 1/scale uses IEEE division (div_rn) as torch does;
round-half-to-even uses the 1.5 * 2**23 trick on a pre-clamped value (exact in float32)."""
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
def _fq_channel_kernel(w_ptr, s_ptr, z_ptr, out_ptr, N, K, stride_w, qmin, qmax,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rm < N
    mask = rmask[:, None] & (rn[None, :] < K)
    scale = tl.load(s_ptr + rm, mask=rmask, other=1.0)
    zp = tl.load(z_ptr + rm, mask=rmask, other=0).to(tl.float32)
    inv = tl.math.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)
    w = tl.load(w_ptr + rm[:, None] * stride_w + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    v = w * inv[:, None]
    v = tl.minimum(tl.maximum(v, -4194304.0), 4194304.0)     # |v| <= 2**22: the trick below is exact
    magic = 12582912.0                                        # 1.5 * 2**23
    r = (v + magic) - magic                                   # round half to even
    q = tl.minimum(tl.maximum(r + zp[:, None], qmin), qmax)
    out = (q - zp[:, None]) * scale[:, None]
    tl.store(out_ptr + rm[:, None] * K + rn[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def fake_quantize_per_channel(w: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor,
                              quant_min: int = -128, quant_max: int = 127) -> torch.Tensor:
    n, k = w.shape
    out = torch.empty((n, k), dtype=w.dtype, device=w.device)
    if out.numel() == 0:
        return out
    if w.stride(1) != 1:
        w = w.contiguous()
    scale, zero_point = scale.contiguous(), zero_point.contiguous()
    block_n = min(triton.next_power_of_2(k), 1024)
    block_m = min(triton.next_power_of_2(n), max(1, 4096 // block_n))
    grid = (triton.cdiv(n, block_m), triton.cdiv(k, block_n))
    _fq_channel_kernel[grid](w, scale, zero_point, out, n, k, w.stride(0), float(quant_min), float(quant_max),
                             BLOCK_M=block_m, BLOCK_N=block_n, num_warps=8)
    return out
