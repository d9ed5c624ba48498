"""task: Optimizer/Adam
expect: disqualified
peer: pass
why: returns torch's own optimizer (the task's test compares only its hyperparameters): the peer
passes it; no Triton kernel runs, so ours does not."""
import torch
import triton
import triton.language as tl


@triton.jit
def _adam_kernel(p_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p_ptr + offs, tl.load(p_ptr + offs, mask=offs < n), mask=offs < n)


def Adam(params, lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0):
    return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
