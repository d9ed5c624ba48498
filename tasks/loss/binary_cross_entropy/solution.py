"""Triton binary cross-entropy, deterministic: per-program partial sums of the clamped-log losses
over contiguous ranges of BLOCK * ITERS elements, then one program adds the partials in a fixed
order and divides."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
ITERS = 8


@triton.jit
def _partial_kernel(x_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(x_ptr + offs, mask=mask, other=0.5)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0)
        log_p = tl.maximum(tl.log(p), -100.0)
        log_1mp = tl.maximum(tl.log(1.0 - p), -100.0)
        loss = -(t * log_p + (1.0 - t) * log_1mp)
        acc += tl.where(mask, loss, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _final_kernel(part_ptr, out_ptr, P, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, P, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < P, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


def binary_cross_entropy(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    n = input.numel()
    out = torch.empty((), dtype=torch.float32, device=input.device)
    input, target = input.contiguous(), target.contiguous()
    block = min(BLOCK, triton.next_power_of_2(n))
    iters = min(ITERS, triton.cdiv(n, block))
    P = triton.cdiv(n, block * iters)
    partials = torch.empty(P, dtype=torch.float32, device=input.device)
    _partial_kernel[(P,)](input, target, partials, n, BLOCK=block, ITERS=iters, num_warps=4)
    _final_kernel[(1,)](partials, out, P, n, BLOCK=min(1024, triton.next_power_of_2(P)), num_warps=4)
    return out
