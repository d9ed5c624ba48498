"""Triton router GEMM + softmax: each program owns BLOCK_M tokens and all experts (BLOCK_E =
next power of two >= E, at most 256), accumulates the logits with float32 tl.dot over K, then
applies a masked row softmax to the accumulator and stores float32 probabilities."""
import torch
import triton
import triton.language as tl


@triton.jit
def _linear_softmax_kernel(x_ptr, w_ptr, out_ptr, M, E, K,
                           BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    re = tl.arange(0, BLOCK_E)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + re[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (re[None, :] < E), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    valid = re[None, :] < E
    logits = tl.where(valid, acc, float("-inf"))
    mx = tl.max(logits, axis=1)
    e = tl.where(valid, tl.exp(logits - mx[:, None]), 0.0)
    p = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + rm[:, None].to(tl.int64) * E + re[None, :], p, mask=(rm[:, None] < M) & valid)


def linear_softmax(x: torch.Tensor, w_gate: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    e = w_gate.shape[0]
    out = torch.empty((m, e), dtype=torch.float32, device=x.device)
    if out.numel() == 0:
        return out
    x, w_gate = x.contiguous(), w_gate.contiguous()
    be = max(16, triton.next_power_of_2(e))
    bm = min(64 if be <= 128 else 32, max(16, triton.next_power_of_2(m)))
    bk = min(64, max(16, triton.next_power_of_2(k)))
    _linear_softmax_kernel[(triton.cdiv(m, bm),)](x, w_gate, out, m, e, k, BLOCK_M=bm, BLOCK_E=be, BLOCK_K=bk,
                                                  num_warps=4, num_stages=3)
    return out
