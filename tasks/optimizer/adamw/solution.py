"""Triton AdamW step: one fused elementwise kernel reads param, grad and both moments once and
writes param and the moments back in place. Scalar factors are folded on the host."""
import math

import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, beta1, beta2, step_size, inv_bc2_sqrt, eps, decay,
                  BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    p = p * decay
    m = m + (1.0 - beta1) * (g - m)
    v = v * beta2 + (1.0 - beta2) * g * g
    denom = tl.sqrt(v) * inv_bc2_sqrt + eps
    p = p - step_size * m / denom
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)


def adamw(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
          step: int = 1, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-2) -> None:
    n = param.numel()
    if n == 0:
        return None
    step_size = lr / (1 - beta1 ** step)
    inv_bc2_sqrt = 1.0 / math.sqrt(1 - beta2 ** step)
    _adamw_kernel[(triton.cdiv(n, BLOCK),)](param, grad, exp_avg, exp_avg_sq, n, beta1, beta2, step_size,
                                            inv_bc2_sqrt, eps, 1.0 - lr * weight_decay, BLOCK=BLOCK, num_warps=8)
    return None
