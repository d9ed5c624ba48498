"""Triton Lion step: one fused elementwise kernel; sign(c) is built from two comparisons so that
c == 0 gives 0."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _lion_kernel(p_ptr, g_ptr, m_ptr, n, lr, beta1, beta2, decay, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    c = m * beta1 + g * (1.0 - beta1)
    sign = tl.where(c > 0, 1.0, 0.0) - tl.where(c < 0, 1.0, 0.0)
    p = p * decay - lr * sign
    m = m * beta2 + g * (1.0 - beta2)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)


def lion(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, lr: float = 1e-4, beta1: float = 0.9,
         beta2: float = 0.99, weight_decay: float = 0.0) -> None:
    n = param.numel()
    if n == 0:
        return None
    _lion_kernel[(triton.cdiv(n, BLOCK),)](param, grad, exp_avg, n, lr, beta1, beta2, 1.0 - lr * weight_decay,
                                           BLOCK=BLOCK, num_warps=8)
    return None
