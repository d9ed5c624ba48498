"""Triton bmm + RMSNorm + GELU in two launches. (1) A batched tiled GEMM (grid: tiles x batch,
float32 tl.dot, b read through its strides) rounds h to the dtype, stores it into the output
buffer and writes each tile's per-row sum of h**2 into a [B*M, tiles_n] float32 workspace
(deterministic, no atomics). (2) A grid of (row block, column block) programs reduces each row's
partials to 1/rms and rewrites its tile in place as gelu(h * rstd * norm_weight)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _to_out(v, dtype: tl.constexpr):
    """fp32 -> dtype, round-to-nearest-even (bf16 rounded on the bits: the CPU interpreter would
    truncate)."""
    if dtype == tl.bfloat16:
        u = v.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        v = u.to(tl.float32, bitcast=True)
    return v.to(dtype)


@triton.jit
def _bmm_sumsq_kernel(a_ptr, b_ptr, h_ptr, ws_ptr, M, N, K, TILES_N, sab, sam, sak, sbb, sbk, sbn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    bi = tl.program_id(1).to(tl.int64)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % group_size
    pid_n = (pid % (GROUP_M * num_n)) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + bi * sab + rm[:, None].to(tl.int64) * sam + rk[None, :] * sak
    b_ptrs = b_ptr + bi * sbb + rn[None, :].to(tl.int64) * sbn + rk[:, None] * sbk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    rows = bi * M + rm
    h = _to_out(acc, h_ptr.dtype.element_ty)
    tl.store(h_ptr + rows[:, None] * N + rn[None, :], h, mask=mask)
    hf = tl.where(mask, h.to(tl.float32), 0.0)
    tl.store(ws_ptr + rows * TILES_N + pid_n, tl.sum(hf * hf, axis=1), mask=rm < M)


@triton.jit
def _rmsnorm_gelu_kernel(h_ptr, ws_ptr, nw_ptr, R, N, TILES_N, eps,
                         BLOCK_R: tl.constexpr, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    rmask = rows < R
    t = tl.arange(0, BLOCK_T)
    part = tl.load(ws_ptr + rows[:, None] * TILES_N + t[None, :], mask=rmask[:, None] & (t[None, :] < TILES_N),
                   other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(part, axis=1) / N + eps)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    offs = rows[:, None] * N + cols[None, :]
    h = tl.load(h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(nw_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = h * rstd[:, None] * w[None, :]
    out = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    tl.store(h_ptr + offs, _to_out(out, h_ptr.dtype.element_ty), mask=mask)


def bmm_rmsnorm_gelu(a: torch.Tensor, b: torch.Tensor, norm_weight: torch.Tensor,
                     eps: float = 1e-6) -> torch.Tensor:
    bt, m, k = a.shape
    n = b.shape[2]
    out = torch.empty((bt, m, n), dtype=a.dtype, device=a.device)
    if out.numel() == 0:
        return out
    norm_weight = norm_weight.contiguous()
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(128, max(16, triton.next_power_of_2(n)))
    bk = min(64, max(16, triton.next_power_of_2(k)))
    tiles_n = triton.cdiv(n, bn)
    ws = torch.empty((bt * m, tiles_n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, bm) * tiles_n, bt)
    _bmm_sumsq_kernel[grid](a, b, out, ws, m, n, k, tiles_n, a.stride(0), a.stride(1), a.stride(2),
                            b.stride(0), b.stride(1), b.stride(2), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                            num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    r = bt * m
    block = min(triton.next_power_of_2(n), 2048)
    block_r = min(triton.next_power_of_2(r), max(1, 4096 // block))
    _rmsnorm_gelu_kernel[(triton.cdiv(r, block_r), triton.cdiv(n, block))](
        out, ws, norm_weight, r, n, tiles_n, eps, BLOCK_R=block_r, BLOCK=block,
        BLOCK_T=triton.next_power_of_2(tiles_n), num_warps=8)
    return out
