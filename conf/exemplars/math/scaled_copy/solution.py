import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = x.to(tl.float32) * alpha  # compute in fp32, store in the input's dtype
    tl.store(y_ptr + offs, y.to(x.dtype), mask=mask)


def scaled_copy(x: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    _scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, alpha, BLOCK=BLOCK)
    return y
