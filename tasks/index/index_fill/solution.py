"""Triton index_fill_: x is viewed (no copy) as [size(dim), A, B] by moving `dim` to the front, so
each index addresses a slice of A * B elements at strides (s_a, s_b). grid = (index block, slice
block); each program writes `value` into a [BLOCK_K, BLOCK_E] set of slice elements (repeated
indices write the same value, so the order does not matter). For float16/bfloat16 the value is
rounded to the target precision on the host (round half to even), so the kernel's conversion is
exact."""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _index_fill_kernel(x_ptr, idx_ptr, K, E, B, s_dim, s_a, s_b, value,
                       BLOCK_K: tl.constexpr, BLOCK_E: tl.constexpr):
    rk = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    re = tl.program_id(1) * BLOCK_E + tl.arange(0, BLOCK_E)
    k_mask = rk < K
    pos = tl.load(idx_ptr + rk, mask=k_mask, other=0)
    off = (re // B).to(tl.int64) * s_a + (re % B).to(tl.int64) * s_b
    ptrs = x_ptr + pos[:, None] * s_dim + off[None, :]
    vals = (tl.zeros((BLOCK_K, BLOCK_E), dtype=tl.float32) + value).to(x_ptr.dtype.element_ty)
    tl.store(ptrs, vals, mask=k_mask[:, None] & (re < E)[None, :])


def _round_to_bits(v: float, bits: int) -> float:
    """Round a normal float to `bits` significant bits, half to even (Python's round)."""
    if v == 0 or not math.isfinite(v):
        return v
    m, e = math.frexp(v)
    return math.ldexp(round(m * (1 << bits)), e - bits)


def index_fill(x: torch.Tensor, dim: int, index: torch.Tensor, value: float) -> None:
    K = index.shape[0]
    if K == 0 or x.numel() == 0:
        return None
    index = index.contiguous()
    if x.dtype == torch.bfloat16:
        value = _round_to_bits(value, 8)
    elif x.dtype == torch.float16:
        value = _round_to_bits(value, 11)
    v = x.movedim(dim, 0)
    while v.dim() < 3:
        v = v.unsqueeze(-1)
    A, B = v.shape[1], v.shape[2]
    E = A * B
    block_e = min(1024, triton.next_power_of_2(E))
    block_k = max(1, min(4096 // block_e, triton.next_power_of_2(K)))
    grid = (triton.cdiv(K, block_k), triton.cdiv(E, block_e))
    _index_fill_kernel[grid](v, index, K, E, B, v.stride(0), v.stride(1), v.stride(2), value,
                             BLOCK_K=block_k, BLOCK_E=block_e, num_warps=4)
    return None
