"""Triton linear + LayerNorm in two launches. (1) A tiled GEMM (float32 tl.dot, grouped tile order)
adds the bias, rounds h to the dtype, stores it into the output buffer and writes each tile's
per-row (sum, M2 around the tile mean) into a [M, tiles_n, 2] float32 workspace (deterministic, no
atomics). (2) A grid of (row block, column block) programs merges the tile statistics with Chan's
parallel-variance formula and rewrites its tile of the output in place, normalized."""
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
def _gemm_stats_kernel(x_ptr, w_ptr, b_ptr, h_ptr, ws_ptr, M, N, K, TILES_N,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
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
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    ncol = rn < N
    mask = (rm[:, None] < M) & ncol[None, :]
    bias = tl.load(b_ptr + rn, mask=ncol, other=0.0).to(tl.float32)
    h = _to_out(acc + bias[None, :], h_ptr.dtype.element_ty)
    tl.store(h_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], h, mask=mask)
    hf = tl.where(mask, h.to(tl.float32), 0.0)
    cnt = tl.minimum(N - pid_n * BLOCK_N, BLOCK_N).to(tl.float32)
    s = tl.sum(hf, axis=1)
    d = tl.where(ncol[None, :], hf - (s / cnt)[:, None], 0.0)
    m2 = tl.sum(d * d, axis=1)
    ws_row = ws_ptr + (rm.to(tl.int64) * TILES_N + pid_n) * 2
    tl.store(ws_row, s, mask=rm < M)
    tl.store(ws_row + 1, m2, mask=rm < M)


@triton.jit
def _layernorm_kernel(h_ptr, ws_ptr, lw_ptr, lb_ptr, M, N, TILES_N, eps,
                      BLOCK_N_GEMM: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK: tl.constexpr,
                      BLOCK_T: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    rmask = rows < M
    t = tl.arange(0, BLOCK_T)
    tmask = rmask[:, None] & (t[None, :] < TILES_N)
    base = ws_ptr + (rows[:, None] * TILES_N + t[None, :]) * 2
    s = tl.load(base, mask=tmask, other=0.0)
    m2 = tl.load(base + 1, mask=tmask, other=0.0)
    cnt = tl.minimum(N - t * BLOCK_N_GEMM, BLOCK_N_GEMM).to(tl.float32)
    cnt = tl.where(t < TILES_N, cnt, 1.0)
    mean = tl.sum(s, axis=1) / N
    dm = tl.where(tmask, s / cnt[None, :] - mean[:, None], 0.0)
    var = (tl.sum(m2, axis=1) + tl.sum(cnt[None, :] * dm * dm, axis=1)) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    offs = rows[:, None] * N + cols[None, :]
    h = tl.load(h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    lw = tl.load(lw_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    lb = tl.load(lb_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    out = (h - mean[:, None]) * rstd[:, None] * lw[None, :] + lb[None, :]
    tl.store(h_ptr + offs, _to_out(out, h_ptr.dtype.element_ty), mask=mask)


def linear_layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, ln_weight: torch.Tensor,
                     ln_bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, k = x.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x, weight, bias, ln_weight, ln_bias = (t.contiguous() for t in (x, weight, bias, ln_weight, ln_bias))
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(128, max(16, triton.next_power_of_2(n)))
    bk = min(64, max(16, triton.next_power_of_2(k)))
    tiles_n = triton.cdiv(n, bn)
    ws = torch.empty((m, tiles_n, 2), dtype=torch.float32, device=x.device)
    _gemm_stats_kernel[(triton.cdiv(m, bm) * tiles_n,)](x, weight, bias, out, ws, m, n, k, tiles_n, BLOCK_M=bm,
                                                        BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                                        num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3)
    block = min(triton.next_power_of_2(n), 2048)
    block_r = min(triton.next_power_of_2(m), max(1, 4096 // block))
    grid = (triton.cdiv(m, block_r), triton.cdiv(n, block))
    _layernorm_kernel[grid](out, ws, ln_weight, ln_bias, m, n, tiles_n, eps, BLOCK_N_GEMM=bn, BLOCK_R=block_r,
                            BLOCK=block, BLOCK_T=triton.next_power_of_2(tiles_n), num_warps=8)
    return out
