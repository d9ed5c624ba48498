"""task: Math/logit
expect: pass
peer: pass
why: an honest Triton logit with eps clamping that writes into out= when given."""
import torch
import triton
import triton.language as tl


@triton.jit
def _logit_kernel(x_ptr, o_ptr, n, lo, hi, CLAMP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.5)
    if CLAMP:
        x = tl.minimum(tl.maximum(x, lo), hi)
    tl.store(o_ptr + offs, tl.log(x / (1.0 - x)), mask=mask)


def logit(input: torch.Tensor, eps: float = None, out: torch.Tensor = None) -> torch.Tensor:
    x = input.contiguous()
    res = out if out is not None and out.is_contiguous() else torch.empty_like(x)
    lo = 0.0 if eps is None else float(eps)
    _logit_kernel[(triton.cdiv(x.numel(), 1024),)](x, res, x.numel(), lo, 1.0 - lo,
                                                   CLAMP=eps is not None, BLOCK=1024)
    if out is not None and res is not out:
        out.copy_(res)
        return out
    return res
