"""Triton frexp: one flat elementwise kernel over the collapsed (at most 4-D) strided view of the
input, working on the float32 bit pattern with integer ops only (subnormals are renormalised through
an exact int -> float conversion), so no floating-point flush-to-zero can interfere."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _frexp_math(x):
    """frexp of float32 values (every float16/bfloat16 value is exact in float32): (mantissa, exponent)."""
    bits = x.to(tl.int32, bitcast=True)
    field = (bits >> 23) & 0xFF
    # subnormal x = frac * 2**-149: frac converted to float32 is exact and normal, so read its exponent
    fbits = (bits & 0x7FFFFF).to(tl.float32).to(tl.int32, bitcast=True)
    sub = field == 0
    e = tl.where(sub, ((fbits >> 23) & 0xFF) - 275, field - 126)
    mbits = tl.where(sub, fbits, bits) & 0x7FFFFF | (126 << 23)  # same fraction, exponent of [0.5, 1)
    m = mbits.to(tl.float32, bitcast=True)
    m = tl.where(bits < 0, -m, m)  # the sign from the sign bit (float compares may flush subnormals)
    zero = (bits & 0x7FFFFFFF) == 0
    return tl.where(zero, x, m), tl.where(zero, 0, e)


@triton.jit
def _offset(offs, S1, S2, S3, s0, s1, s2, s3):
    """Row-major logical index (int32) -> element offset (int64) of a strided operand over the
    collapsed, at most 4-D, iteration space [S0, S1, S2, S3]."""
    i3 = offs % S3
    r = offs // S3
    i2 = r % S2
    r = r // S2
    i1 = r % S1
    i0 = r // S1
    return (i0.to(tl.int64) * s0 + i1.to(tl.int64) * s1 + i2.to(tl.int64) * s2
            + i3.to(tl.int64) * s3)


@triton.jit
def _frexp_kernel(a0_ptr, o0_ptr, o1_ptr, n, S1, S2, S3, a0s0, a0s1, a0s2, a0s3, A0_FLAT: tl.constexpr,
                  BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if A0_FLAT:
        a0 = tl.load(a0_ptr + offs, mask=mask)
    else:
        a0 = tl.load(a0_ptr + _offset(offs, S1, S2, S3, a0s0, a0s1, a0s2, a0s3), mask=mask)
    y0, y1 = _frexp_math(a0.to(tl.float32))
    tl.store(o0_ptr + offs, y0.to(o0_ptr.dtype.element_ty), mask=mask)
    tl.store(o1_ptr + offs, y1.to(o1_ptr.dtype.element_ty), mask=mask)


def _layout(shape, strides):
    """Collapse the iteration space of a broadcast elementwise op: drop size-1 dimensions and merge
    neighbouring dimensions that every operand walks contiguously (stride[d-1] == stride[d] * size[d]).
    Returns the collapsed sizes and each operand's strides over them."""
    sizes, out = [], [[] for _ in strides]
    for d, size in enumerate(shape):
        if size == 1:
            continue
        if sizes and all(st[-1] == s[d] * size for st, s in zip(out, strides)):
            sizes[-1] *= size
            for st, s in zip(out, strides):
                st[-1] = s[d]
        else:
            sizes.append(size)
            for st, s in zip(out, strides):
                st.append(s[d])
    return sizes, out


def frexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ops = (x,)
    shape = torch.broadcast_shapes(*[t.shape for t in ops])
    outs = [torch.empty(shape, dtype=d, device=x.device) for d in (x.dtype, torch.int32,)]
    n = outs[0].numel()
    if n == 0:
        return tuple(outs)
    assert n < 2**31, "int32 element indices"
    ops = [t.expand(shape) for t in ops]  # broadcast operands as stride-0 views
    sizes, st = _layout(list(shape), [list(t.stride()) for t in ops])
    if len(sizes) > 4:  # rare: more than 4 non-mergeable dims -> plain row-major copies
        ops = [t.contiguous() for t in ops]
        sizes, st = [n], [[1] for _ in ops]
    flat = [len(sizes) == 0 or (len(sizes) == 1 and s == [1]) for s in st]
    pad = 4 - len(sizes)
    S = [1] * pad + sizes
    strides = [v for s in st for v in [0] * pad + s]
    _frexp_kernel[(triton.cdiv(n, BLOCK),)](*ops, outs[0], outs[1], n, S[1], S[2], S[3], *strides,
        A0_FLAT=flat[0], BLOCK=BLOCK, num_warps=8)
    return tuple(outs)
