"""task: Activation/relu
expect: disqualified
peer: pass
why: a cheat: torch computes the result and no Triton kernel runs; the peer only compares values."""
import torch
import triton
import triton.language as tl


@triton.jit
def _unused_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    return torch.nn.functional.relu(input, inplace=inplace)
