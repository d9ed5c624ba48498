"""Triton soft-capped log-softmax over long rows: one program per row, two sweeps. Sweep 1 keeps a
per-lane running max and rescaled running sum of exp (online softmax) over chunks; the lanes are
combined into the row's log-sum-exp. Sweep 2 recomputes the capped logits and writes z - lse.
tanh is built from exp: tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|)."""
import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _softcap(x, cap, inv_cap):
    u = x * inv_cap
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    return cap * tl.where(u < 0, -t, t)


@triton.jit
def _softcap_log_softmax_kernel(x_ptr, out_ptr, V, cap, inv_cap, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * V
    o_row = out_ptr + row * V
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        z = _softcap(tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32), cap, inv_cap)
        z = tl.where(mask, z, float("-inf"))
        m_new = tl.maximum(m, z)
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - safe) + tl.exp(z - safe)
        m = m_new
    mx = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - mx), axis=0)
    lse = mx + tl.log(total)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        z = _softcap(tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32), cap, inv_cap)
        tl.store(o_row + cols, z - lse, mask=mask)


def softcap_log_softmax(logits: torch.Tensor, cap: float) -> torch.Tensor:
    m, v = logits.shape
    out = torch.empty((m, v), dtype=torch.float32, device=logits.device)
    if out.numel() == 0:
        return out
    logits = logits.contiguous()
    block = min(BLOCK, triton.next_power_of_2(v))
    _softcap_log_softmax_kernel[(m,)](logits, out, v, cap, 1.0 / cap, BLOCK=block, num_warps=8)
    return out
