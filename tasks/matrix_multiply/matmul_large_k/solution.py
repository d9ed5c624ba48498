"""Triton split-K fp16 matmul: grid = (output tile, split). Each program multiplies one K range
(a whole number of BLOCK_K steps) into an fp32 tile and writes it to a float32 workspace
[SPLIT, M, N]; a second kernel adds the SPLIT partials of each element in order (deterministic,
no atomics) and rounds once to fp16."""
import torch
import triton
import triton.language as tl


@triton.jit
def _splitk_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, k_per_split, sam, sak, sbk, sbn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_lo = split.to(tl.int64) * k_per_split
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * sam + (k_lo + rk)[None, :] * sak
    b_ptrs = b_ptr + (k_lo + rk)[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_hi = tl.minimum(K - k_lo, k_per_split)  # elements of K this split owns
    for k in range(0, k_per_split, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_hi - k), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_hi - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    ws = ws_ptr + split.to(tl.int64) * M * N + rm[:, None] * N + rn[None, :]
    tl.store(ws, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _reduce_kernel(ws_ptr, c_ptr, MN, SPLIT, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLIT):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(tl.float16), mask=mask)


def matmul_large_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float16, device=a.device)
    if c.numel() == 0:
        return c
    bm = max(16, min(64, triton.next_power_of_2(M)))
    bn = max(16, min(128, triton.next_power_of_2(N)))
    bk = max(16, min(64, triton.next_power_of_2(K)))
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    # about 4 programs per SM of a large GPU, each with at least 8 BLOCK_K steps
    split = max(1, min(triton.cdiv(512, tiles), triton.cdiv(K, 8 * bk), 256))
    k_per_split = triton.cdiv(triton.cdiv(K, split), bk) * bk
    split = triton.cdiv(K, k_per_split)
    ws = torch.empty((split, M, N), dtype=torch.float32, device=a.device)
    _splitk_kernel[(tiles, split)](a, b, ws, M, N, K, k_per_split, *a.stride(), *b.stride(),
                                   BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=4)
    block = 1024
    _reduce_kernel[(triton.cdiv(M * N, block),)](ws, c, M * N, split, BLOCK=block, num_warps=4)
    return c
