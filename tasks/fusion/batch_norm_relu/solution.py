"""Triton inference BatchNorm + ReLU: a flat pass over x's memory (NCHW or NHWC). The channel of an
element is (offset // HW) % C for NCHW and offset % C for channels-last; per-channel scale and
shift are folded from the statistics in the kernel. The output has x's memory layout."""
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
def _bn_relu_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, out_ptr, n, C, HW, eps,
                    CHANNELS_LAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if CHANNELS_LAST:
        c = offs % C
    else:
        c = (offs // HW) % C
    mean = tl.load(mean_ptr + c, mask=mask, other=0.0)
    var = tl.load(var_ptr + c, mask=mask, other=1.0)
    w = tl.load(w_ptr + c, mask=mask, other=0.0)
    b = tl.load(b_ptr + c, mask=mask, other=0.0)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) / tl.sqrt(var + eps) * w + b
    out = tl.where(y > 0, y, 0.0)
    tl.store(out_ptr + offs, _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def batch_norm_relu(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                    weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    n_, c, h, w = x.shape
    channels_last = (not x.is_contiguous()) and x.stride(1) == 1 and x.stride(3) == c and x.stride(2) == w * c \
        and x.stride(0) == h * w * c
    if not channels_last:
        x = x.contiguous()
    out = torch.empty_like(x)  # same memory layout as x
    n = x.numel()
    if n == 0:
        return out
    params = [t.contiguous() for t in (running_mean, running_var, weight, bias)]
    _bn_relu_kernel[(triton.cdiv(n, BLOCK),)](x, *params, out, n, c, h * w, eps,
                                              CHANNELS_LAST=channels_last, BLOCK=BLOCK, num_warps=8)
    return out
