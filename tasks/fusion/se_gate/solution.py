"""Triton squeeze-and-excitation gate. Small planes (H*W < 1024): flat blocks over all elements,
each element looking up its (b, c) gate. Large planes: a 2-D grid of (b*C + c) planes x blocks
of H*W, with the plane's gate read once as a scalar. The gate is read through its strides."""
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
def _se_plane_kernel(x_ptr, g_ptr, out_ptr, C, HW, sgb, sgc, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    bi = plane // C
    ci = plane % C
    s = tl.sigmoid(tl.load(g_ptr + bi * sgb + ci * sgc).to(tl.float32))
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    base = plane.to(tl.int64) * HW
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + offs, _to_out(x * s, out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _se_flat_kernel(x_ptr, g_ptr, out_ptr, n, C, HW, sgb, sgc, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    plane = offs // HW
    bi = plane // C
    ci = plane % C
    gl = tl.load(g_ptr + bi * sgb + ci * sgc, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, _to_out(x * tl.sigmoid(gl), out_ptr.dtype.element_ty), mask=mask)


def se_gate(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.shape
    out = torch.empty((b, c, h, w), dtype=x.dtype, device=x.device)
    n = out.numel()
    if n == 0:
        return out
    x = x.contiguous()
    hw = h * w
    if hw >= 1024:
        block = min(triton.next_power_of_2(hw), 4096)
        grid = (b * c, triton.cdiv(hw, block))
        _se_plane_kernel[grid](x, gate, out, c, hw, gate.stride(0), gate.stride(1), BLOCK=block,
                               num_warps=max(1, min(8, block // 256)))
    else:
        block = 4096
        _se_flat_kernel[(triton.cdiv(n, block),)](x, gate, out, n, c, hw, gate.stride(0), gate.stride(1),
                                                  BLOCK=block, num_warps=8)
    return out
