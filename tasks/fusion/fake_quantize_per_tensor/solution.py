"""Triton per-tensor fake quantization: one flat elementwise pass (2-D strided inputs read through
their strides). Round-half-to-even uses the 1.5 * 2**23 trick on a pre-clamped value (exact in
float32); 1/scale is formed on the host and passed as a float32 argument."""
import torch
import triton
import triton.language as tl

BLOCK = 4096


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
def _fq_tensor_kernel(x_ptr, out_ptr, n, n_cols, sr, sc, inv, scale, zp, qmin, qmax,
                      STRIDED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STRIDED:
        src = (offs // n_cols) * sr + (offs % n_cols) * sc
    else:
        src = offs
    x = tl.load(x_ptr + src, mask=mask, other=0.0).to(tl.float32)
    v = tl.minimum(tl.maximum(x * inv, -4194304.0), 4194304.0)   # |v| <= 2**22
    magic = 12582912.0                                            # 1.5 * 2**23
    r = (v + magic) - magic                                       # round half to even
    q = tl.minimum(tl.maximum(r + zp, qmin), qmax)
    out = (q - zp) * scale
    tl.store(out_ptr + offs, _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def fake_quantize_per_tensor(x: torch.Tensor, scale: float, zero_point: int, quant_min: int = 0,
                             quant_max: int = 255) -> torch.Tensor:
    strided = not x.is_contiguous()
    if strided and x.dim() != 2:
        x = x.contiguous()
        strided = False
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    n_cols, sr, sc = (x.shape[1], x.stride(0), x.stride(1)) if strided else (1, 0, 0)
    _fq_tensor_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, n_cols, sr, sc, 1.0 / scale, float(scale),
                                                float(zero_point), float(quant_min), float(quant_max),
                                                STRIDED=strided, BLOCK=BLOCK, num_warps=8)
    return out
