"""Triton atan2: one elementwise kernel over the broadcast iteration space. The wrapper expands the
operands to stride-0 views and collapses the space to at most 4 dims; each operand is read flat when
its layout is plain row-major, else through its own strides. Computes in float32 and rounds once at
the store."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _atan2_math(a, b):
    """atan2(a, b): octant reduction to t in [0, 1], a second fold around pi/4, and an odd degree-11 polynomial fitted (weighted least squares, relative error) on |v| <= tan(pi/8)."""
    ay = tl.abs(a)
    ax = tl.abs(b)
    hi = tl.maximum(ax, ay)
    t = tl.minimum(ax, ay) / tl.where(hi == 0.0, 1.0, hi)  # in [0, 1]
    big = t > 0.41421356237309503  # tan(pi / 8): fold [tan(pi/8), 1] onto [-tan(pi/8), 0] around pi/4
    v = tl.where(big, (t - 1.0) / (t + 1.0), t)
    s = v * v
    p = -0.3333331861048275 + s * (0.19998698075627602 + s * (-0.1424805113726728 + s * (0.10628621543601144
                                                                                       + s * -0.0616937945507728)))
    r = v + v * s * p  # atan(v) for |v| <= tan(pi / 8), relative error ~2e-9
    r = tl.where(big, r + 0.7853981633974483, r)
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)  # octant: atan(1 / t) = pi/2 - atan(t)
    # signs by their bits: -0.0 counts as negative, as in C (atan2(-0, x < 0) = -pi, atan2(+-0, -0) = +-pi)
    r = tl.where(b.to(tl.int32, bitcast=True) < 0, 3.141592653589793 - r, r)  # left half-plane
    return tl.where(a.to(tl.int32, bitcast=True) < 0, -r, r)


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
def _atan2_kernel(a0_ptr, a1_ptr, o0_ptr, n, S1, S2, S3, a0s0, a0s1, a0s2, a0s3, a1s0, a1s1, a1s2, a1s3,
                  A0_FLAT: tl.constexpr, A1_FLAT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if A0_FLAT:
        a0 = tl.load(a0_ptr + offs, mask=mask)
    else:
        a0 = tl.load(a0_ptr + _offset(offs, S1, S2, S3, a0s0, a0s1, a0s2, a0s3), mask=mask)
    if A1_FLAT:
        a1 = tl.load(a1_ptr + offs, mask=mask)
    else:
        a1 = tl.load(a1_ptr + _offset(offs, S1, S2, S3, a1s0, a1s1, a1s2, a1s3), mask=mask)
    y0 = _atan2_math(a0.to(tl.float32), a1.to(tl.float32))
    tl.store(o0_ptr + offs, y0.to(o0_ptr.dtype.element_ty), mask=mask)


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


def atan2(input: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    ops = (input, other,)
    shape = torch.broadcast_shapes(*[t.shape for t in ops])
    outs = [torch.empty(shape, dtype=d, device=input.device) for d in (input.dtype,)]
    n = outs[0].numel()
    if n == 0:
        return outs[0]
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
    _atan2_kernel[(triton.cdiv(n, BLOCK),)](*ops, outs[0], n, S[1], S[2], S[3], *strides, A0_FLAT=flat[0],
        A1_FLAT=flat[1], BLOCK=BLOCK, num_warps=8)
    return outs[0]
