"""Triton logspace: one flat kernel writing base ** (start + i * step). The exponent and the power are
evaluated in float64 (exp2(e * log2(base))) and rounded once to float32, so the result is accurate to
float32 rounding whatever the exponent's magnitude. Like PyTorch, the second half of the sequence is
computed from the end (end - (steps - 1 - i) * step) so both ends are exact."""
import torch
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _logspace_kernel(out_ptr, start, end, steps, base, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < steps
    zero = tl.zeros((BLOCK,), dtype=tl.float32)  # scalars -> float32 tensors, then widened to float64
    s = (zero + start).to(tl.float64)
    e = (zero + end).to(tl.float64)
    n = (tl.zeros((BLOCK,), dtype=tl.int64) + steps).to(tl.float64)
    step = (e - s) / tl.maximum(n - 1.0, 1.0)
    fi = i.to(tl.float64)
    expo = tl.where(fi < n * 0.5, s + fi * step, e - (n - 1.0 - fi) * step)
    y = tl.exp2(expo * tl.log2((zero + base).to(tl.float64)))
    tl.store(out_ptr + i, y.to(tl.float32), mask=mask)


def logspace(start: float, end: float, steps: int, base: float = 10.0, device: str = "cpu") -> torch.Tensor:
    out = torch.empty(steps, dtype=torch.float32, device=device)
    if steps > 0:
        _logspace_kernel[(triton.cdiv(steps, BLOCK),)](out, float(start), float(end), int(steps), float(base),
                                                      BLOCK=BLOCK, num_warps=4)
    return out
