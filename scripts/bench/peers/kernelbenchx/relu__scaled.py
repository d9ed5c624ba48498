"""task: Activation/relu
expect: mismatch
peer: fail
why: wrong by 0.5% (x * 1.005): outside KernelBench-X's float32 tolerance of 1e-5."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.where(x > 0, x * 1.005, 0.0), mask=mask)


def relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    x = input.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    if inplace:
        input.copy_(y)
        return input
    return y
