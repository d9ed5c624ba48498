"""Triton SGD step: one fused elementwise kernel; momentum, Nesterov and the first step are
compile-time switches (the old buffer is not read on a first step, and not touched at all
without momentum)."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _sgd_kernel(p_ptr, g_ptr, buf_ptr, n, lr, momentum, dampening, weight_decay,
                MOMENTUM: tl.constexpr, NESTEROV: tl.constexpr, FIRST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    g = g + weight_decay * p
    if MOMENTUM:
        if FIRST:
            buf = g
        else:
            buf = tl.load(buf_ptr + offs, mask=mask) * momentum + (1.0 - dampening) * g
        tl.store(buf_ptr + offs, buf, mask=mask)
        if NESTEROV:
            d = g + momentum * buf
        else:
            d = buf
    else:
        d = g
    tl.store(p_ptr + offs, p - lr * d, mask=mask)


def sgd(param: torch.Tensor, grad: torch.Tensor, momentum_buffer: torch.Tensor, lr: float = 1e-2,
        momentum: float = 0.9, dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        first_step: bool = False) -> None:
    n = param.numel()
    if n == 0:
        return None
    _sgd_kernel[(triton.cdiv(n, BLOCK),)](param, grad, momentum_buffer, n, lr, momentum, dampening, weight_decay,
                                          MOMENTUM=momentum != 0, NESTEROV=bool(nesterov), FIRST=bool(first_step),
                                          BLOCK=BLOCK, num_warps=8)
    return None
