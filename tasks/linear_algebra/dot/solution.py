"""Triton dot: a first kernel gives each program a contiguous range of BLOCK * ITERS elements and
writes one fp32 partial sum; a second single-program kernel adds the partials in a fixed order
(deterministic, no atomics)."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
ITERS = 8


@triton.jit
def _partial_kernel(x_ptr, y_ptr, part_ptr, N, stride_x, stride_y,
                    BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_ptr + offs * stride_x, mask=mask, other=0.0)
        y = tl.load(y_ptr + offs * stride_y, mask=mask, other=0.0)
        acc += x * y
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _final_kernel(part_ptr, out_ptr, P, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, P, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < P, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    N = x.shape[0]
    out = torch.empty((), dtype=torch.float32, device=x.device)
    block = min(BLOCK, triton.next_power_of_2(max(N, 1)))
    iters = min(ITERS, triton.cdiv(max(N, 1), block))
    P = triton.cdiv(max(N, 1), block * iters)
    partials = torch.empty(P, dtype=torch.float32, device=x.device)
    _partial_kernel[(P,)](x, y, partials, N, x.stride(0), y.stride(0), BLOCK=block, ITERS=iters, num_warps=4)
    _final_kernel[(1,)](partials, out, P, BLOCK=min(1024, triton.next_power_of_2(P)), num_warps=4)
    return out
