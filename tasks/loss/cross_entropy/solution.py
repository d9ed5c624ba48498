"""Triton cross-entropy: each program takes BLOCK_N rows and computes their logsumexp with an
online (running max) sweep over the classes in BLOCK_C chunks, then writes the row losses; a
second single-program kernel averages them in a fixed order (deterministic, no atomics)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_loss_kernel(logits_ptr, target_ptr, loss_ptr, N, C, stride_n, stride_c,
                     BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    row_ptr = logits_ptr + rows.to(tl.int64)[:, None] * stride_n
    # per-lane running max and sum of exp(x - max), merged across lanes at the end
    m = tl.full((BLOCK_N, BLOCK_C), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK_N, BLOCK_C), dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = row_mask[:, None] & (cols < C)[None, :]
        x = tl.load(row_ptr + cols[None, :] * stride_c, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, x)
        # lanes that have only seen padding stay at -inf; shift them by 0 so no inf - inf occurs
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=1)
    row_max = tl.where(row_mask, row_max, 0.0)  # padding rows: keep finite
    total = tl.sum(s * tl.exp(m - row_max[:, None]), axis=1)
    total = tl.where(row_mask, total, 1.0)
    t = tl.load(target_ptr + rows, mask=row_mask, other=0)
    x_t = tl.load(logits_ptr + rows.to(tl.int64) * stride_n + t * stride_c, mask=row_mask, other=0.0)
    tl.store(loss_ptr + rows, row_max + tl.log(total) - x_t, mask=row_mask)


@triton.jit
def _mean_kernel(loss_ptr, out_ptr, N, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(loss_ptr + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / N)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    N, C = logits.shape
    losses = torch.empty(N, dtype=torch.float32, device=logits.device)
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    # ~4K-element tiles: long rows get one row per program, short rows many
    block_c = min(triton.next_power_of_2(C), 4096)
    block_n = max(1, min(4096 // block_c, triton.next_power_of_2(N)))
    _row_loss_kernel[(triton.cdiv(N, block_n),)](logits, target, losses, N, C,
                                                 logits.stride(0), logits.stride(1),
                                                 BLOCK_N=block_n, BLOCK_C=block_c, num_warps=8)
    block = min(triton.next_power_of_2(N), 4096)
    _mean_kernel[(1,)](losses, out, N, BLOCK=block, num_warps=8)
    return out
