"""Triton cdist (p = 2), direct differences: grid = (batch, P tile, R tile). Each program loops
over the M coordinates, loading one coordinate of BLOCK_P points of x1 and BLOCK_R points of x2,
and accumulates the squared differences of the [BLOCK_P, BLOCK_R] tile in fp32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cdist_kernel(x1_ptr, x2_ptr, out_ptr, P, R, M, s1b, s1p, s1m, s2b, s2r, s2m,
                  BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rp = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    rr = tl.program_id(2) * BLOCK_R + tl.arange(0, BLOCK_R)
    mp = rp < P
    mr = rr < R
    p_ptrs = x1_ptr + b * s1b + rp.to(tl.int64) * s1p
    r_ptrs = x2_ptr + b * s2b + rr.to(tl.int64) * s2r
    acc = tl.zeros((BLOCK_P, BLOCK_R), dtype=tl.float32)
    for k in range(0, M):
        a = tl.load(p_ptrs + k * s1m, mask=mp, other=0.0)
        c = tl.load(r_ptrs + k * s2m, mask=mr, other=0.0)
        d = a[:, None] - c[None, :]
        acc += d * d
    out = out_ptr + b * P * R + rp.to(tl.int64)[:, None] * R + rr[None, :]
    tl.store(out, tl.sqrt(acc), mask=mp[:, None] & mr[None, :])


def cdist(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    B, P, M = x1.shape
    R = x2.shape[1]
    out = torch.empty((B, P, R), dtype=torch.float32, device=x1.device)
    if out.numel() == 0:
        return out
    block_p = min(64, triton.next_power_of_2(P))
    block_r = min(64, triton.next_power_of_2(R))
    grid = (B, triton.cdiv(P, block_p), triton.cdiv(R, block_r))
    _cdist_kernel[grid](x1, x2, out, P, R, M, *x1.stride(), *x2.stride(),
                        BLOCK_P=block_p, BLOCK_R=block_r, num_warps=4)
    return out
