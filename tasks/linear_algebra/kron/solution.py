"""Triton kron: 2-D tiles over the output; each output coordinate (r, c) splits into
(i, k) = divmod(r, P) and (j, l) = divmod(c, Q), and the tile multiplies the gathered a[i, j]
and b[k, l] values in fp32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _kron_kernel(a_ptr, b_ptr, out_ptr, R, C, P, Q, sa0, sa1, sb0, sb1,
                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r < R)[:, None] & (c < C)[None, :]
    i = r // P
    k = r % P
    j = c // Q
    l = c % Q
    a = tl.load(a_ptr + i[:, None] * sa0 + j[None, :] * sa1, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + k[:, None] * sb0 + l[None, :] * sb1, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + r.to(tl.int64)[:, None] * C + c[None, :], (a * b).to(out_ptr.dtype.element_ty), mask=mask)


def kron(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    P, Q = b.shape
    R, C = M * P, N * Q
    out = torch.empty((R, C), dtype=a.dtype, device=a.device)
    if R == 0 or C == 0:
        return out
    block_c = min(triton.next_power_of_2(C), 256)
    block_r = max(1, min(4096 // block_c, triton.next_power_of_2(R)))
    grid = (triton.cdiv(R, block_r), triton.cdiv(C, block_c))
    _kron_kernel[grid](a, b, out, R, C, P, Q, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4)
    return out
