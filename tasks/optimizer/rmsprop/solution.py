"""Triton RMSprop step: one fused elementwise kernel; the optional parts (weight decay, centering,
momentum) are compile-time switches, so unused state is neither read nor written."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _rmsprop_kernel(p_ptr, g_ptr, sq_ptr, ga_ptr, buf_ptr, n, lr, alpha, eps, weight_decay, momentum,
                    CENTERED: tl.constexpr, MOMENTUM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    sq = tl.load(sq_ptr + offs, mask=mask)
    g = g + weight_decay * p
    sq = sq * alpha + (1.0 - alpha) * g * g
    tl.store(sq_ptr + offs, sq, mask=mask)
    if CENTERED:
        ga = tl.load(ga_ptr + offs, mask=mask)
        ga = ga + (1.0 - alpha) * (g - ga)
        tl.store(ga_ptr + offs, ga, mask=mask)
        avg = tl.sqrt(sq - ga * ga) + eps
    else:
        avg = tl.sqrt(sq) + eps
    if MOMENTUM:
        buf = tl.load(buf_ptr + offs, mask=mask)
        buf = buf * momentum + g / avg
        tl.store(buf_ptr + offs, buf, mask=mask)
        p = p - lr * buf
    else:
        p = p - lr * (g / avg)
    tl.store(p_ptr + offs, p, mask=mask)


def rmsprop(param: torch.Tensor, grad: torch.Tensor, square_avg: torch.Tensor, grad_avg: torch.Tensor,
            momentum_buffer: torch.Tensor, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
            weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> None:
    n = param.numel()
    if n == 0:
        return None
    _rmsprop_kernel[(triton.cdiv(n, BLOCK),)](param, grad, square_avg, grad_avg, momentum_buffer, n, lr, alpha,
                                              eps, weight_decay, momentum, CENTERED=bool(centered),
                                              MOMENTUM=momentum > 0, BLOCK=BLOCK, num_warps=8)
    return None
