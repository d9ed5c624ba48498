"""task: Math/sub
expect: pass
peer: pass
why: an honest Triton sub whose entry is named kernel_function, as KernelBench-X accepts."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sub_kernel(x_ptr, y_ptr, o_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(o_ptr + offs, x - alpha * y, mask=mask)


def kernel_function(input, other, *, alpha=1, out=None):
    if not isinstance(other, torch.Tensor):
        other = torch.full_like(input, float(other))
    x, y = torch.broadcast_tensors(input, other)
    x, y = x.contiguous(), y.contiguous()
    res = out if out is not None and out.is_contiguous() else torch.empty_like(x)
    n = x.numel()
    _sub_kernel[(triton.cdiv(n, 1024),)](x, y, res, n, float(alpha), BLOCK=1024)
    if out is not None and res is not out:
        out.copy_(res)
        return out
    return res
