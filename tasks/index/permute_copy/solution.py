"""Triton permute_copy: the output is handled as 4-D (size-1 dimensions dropped, then leading ones
added). Each program copies a [BLOCK_A, BLOCK_B] tile spanning output axis A and the last output
axis B, where A is the output axis along which the input is contiguous (or axis 2 when the
input's contiguous axis already is the last output axis); the other two axes come from the
program id. Loads are then coalesced along A and stores along B (Triton converts the layout
between them)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _permute_kernel(x_ptr, out_ptr, SA, SB, SU, SV, xa, xb, xu, xv, oa, ob, ou, ov,
                    BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr):
    uv = tl.program_id(0)
    u = (uv // SV).to(tl.int64)
    v = (uv % SV).to(tl.int64)
    ra = tl.program_id(1) * BLOCK_A + tl.arange(0, BLOCK_A)
    rb = tl.program_id(2) * BLOCK_B + tl.arange(0, BLOCK_B)
    mask = (ra < SA)[:, None] & (rb < SB)[None, :]
    src = x_ptr + u * xu + v * xv + ra.to(tl.int64)[:, None] * xa + rb.to(tl.int64)[None, :] * xb
    dst = out_ptr + u * ou + v * ov + ra.to(tl.int64)[:, None] * oa + rb.to(tl.int64)[None, :] * ob
    tl.store(dst, tl.load(src, mask=mask), mask=mask)


def permute_copy(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    xp = x.permute(dims)  # a view: strides of x in output order
    out = torch.empty(xp.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    # size-1 dimensions do not move any data: drop them, then pad back to 4-D
    keep = [k for k in range(xp.dim()) if xp.shape[k] != 1]
    pad = 4 - len(keep)
    shape = [1] * pad + [xp.shape[k] for k in keep]
    xs = [0] * pad + [xp.stride(k) for k in keep]
    os_ = [0] * pad + [out.stride(k) for k in keep]
    # axis of the output along which the input is contiguous (largest extent among stride-1 axes)
    cand = [k for k in range(4) if xs[k] == 1 and shape[k] > 1]
    a = cand[-1] if cand else 3
    if a == 3:
        a = 2
    rest = [k for k in range(3) if k != a]
    SA, SB = shape[a], shape[3]
    SU, SV = shape[rest[0]], shape[rest[1]]
    if a == 2 and xs[3] == 1:  # both fast axes agree: wide rows
        block_b = min(1024, triton.next_power_of_2(SB))
        block_a = max(1, min(4096 // block_b, triton.next_power_of_2(SA)))
    else:
        block_a = min(64, triton.next_power_of_2(SA))
        block_b = min(64, triton.next_power_of_2(SB))
    grid = (SU * SV, triton.cdiv(SA, block_a), triton.cdiv(SB, block_b))
    _permute_kernel[grid](x, out, SA, SB, SU, SV, xs[a], xs[3], xs[rest[0]], xs[rest[1]],
                          os_[a], os_[3], os_[rest[0]], os_[rest[1]], BLOCK_A=block_a, BLOCK_B=block_b,
                          num_warps=4)
    return out
