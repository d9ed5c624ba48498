"""Triton uniform RNG: Philox 4x32 via tl.rand4x, keyed by `seed` with a counter per group of
four outputs, so each Philox round yields four floats; the result depends only on (n, seed)."""
import torch
import triton
import triton.language as tl

BLOCK = 1024  # counters per program; each program writes 4 * BLOCK floats


@triton.jit
def _rand_kernel(out_ptr, n, seed, BLOCK: tl.constexpr):
    counters = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.rand4x(seed, counters)
    # four contiguous BLOCK-long runs per program, so every store coalesces
    base = tl.program_id(0) * 4 * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + base, r0, mask=base < n)
    tl.store(out_ptr + base + BLOCK, r1, mask=base + BLOCK < n)
    tl.store(out_ptr + base + 2 * BLOCK, r2, mask=base + 2 * BLOCK < n)
    tl.store(out_ptr + base + 3 * BLOCK, r3, mask=base + 3 * BLOCK < n)


def rand(n: int, seed: int, device: str = "cpu") -> torch.Tensor:
    out = torch.empty(n, dtype=torch.float32, device=device)
    if n > 0:
        _rand_kernel[(triton.cdiv(n, 4 * BLOCK),)](out, n, seed, BLOCK=BLOCK, num_warps=4)
    return out
