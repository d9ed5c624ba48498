"""task: Activation/relu
expect: pass
peer: pass
why: an honest Triton relu; in place when asked, returning its input as the reference does."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


def relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    x = input.contiguous()
    y = x if inplace and x.data_ptr() == input.data_ptr() else torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    if inplace and y.data_ptr() != input.data_ptr():
        input.copy_(y)
        return input
    return y
