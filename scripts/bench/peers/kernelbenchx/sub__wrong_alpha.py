"""task: Math/sub
expect: mismatch
peer: fail
why: wrong: ignores alpha (input - other), which the alpha=2 case shows."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sub_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(o_ptr + offs, x - y, mask=mask)


def sub(input, other, *, alpha=1, out=None):
    if not isinstance(other, torch.Tensor):
        other = torch.full_like(input, float(other))
    x, y = torch.broadcast_tensors(input, other)
    x, y = x.contiguous(), y.contiguous()
    res = torch.empty_like(x)
    _sub_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, res, x.numel(), BLOCK=1024)
    if out is not None:
        out.copy_(res)
        return out
    return res
