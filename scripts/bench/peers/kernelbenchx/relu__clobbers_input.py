"""task: Activation/relu
expect: mismatch
peer: pass
why: right values, but it always works in place: the caller's input is overwritten even with
inplace=False. The peer compares only test_results; this harness compares the declared-mutated input
too, and it differs from the reference's (unchanged when inplace=False)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(x_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


def relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    n = input.numel()
    _relu_kernel[(triton.cdiv(n, 1024),)](input, n, BLOCK=1024)
    return input
