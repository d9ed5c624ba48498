"""Triton SwiGLU MLP in two GEMM launches: (1) gate and up tiles accumulated side by side from one
read of each x tile (two float32 tl.dot per K step), h = silu(g) * u applied in the epilogue and
stored once in the input dtype; (2) out = h @ w_down.T. Grouped tile order for L2 reuse."""
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
def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % group_size
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    return pid_m, pid_n


@triton.jit
def _gate_up_kernel(x_ptr, wg_ptr, wu_ptr, h_ptr, M, F, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = _tile_ids(M, F, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_off = rn[None, :].to(tl.int64) * K + rk[:, None]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kmask = rk < K - k
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & kmask[None, :], other=0.0)
        wmask = kmask[:, None] & (rn[None, :] < F)
        acc_g = tl.dot(a, tl.load(wg_ptr + w_off, mask=wmask, other=0.0), acc_g)
        acc_u = tl.dot(a, tl.load(wu_ptr + w_off, mask=wmask, other=0.0), acc_u)
        x_ptrs += BLOCK_K
        w_off += BLOCK_K
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(h_ptr + rm[:, None].to(tl.int64) * F + rn[None, :], _to_out(h, h_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < F))


@triton.jit
def _down_kernel(h_ptr, w_ptr, out_ptr, M, N, K,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    h_ptrs = h_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(h_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        h_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], _to_out(acc, out_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _blocks(m: int, n: int, k: int) -> tuple[int, int, int, int]:
    bm = min(128, max(16, triton.next_power_of_2(m)))
    bn = min(128, max(16, triton.next_power_of_2(n)))
    bk = min(64, max(16, triton.next_power_of_2(k)))
    return bm, bn, bk, 8 if bm * bn >= 128 * 128 else 4


def gated_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    m, e = x.shape
    f = w_gate.shape[0]
    out = torch.empty((m, e), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    x, w_gate, w_up, w_down = (t.contiguous() for t in (x, w_gate, w_up, w_down))
    h = torch.empty((m, f), dtype=x.dtype, device=x.device)
    bm, bn, bk, warps = _blocks(m, f, e)
    bn = min(bn, 64)                                     # two accumulators per tile
    _gate_up_kernel[(triton.cdiv(m, bm) * triton.cdiv(f, bn),)](x, w_gate, w_up, h, m, f, e, BLOCK_M=bm,
                                                                BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                                                num_warps=warps, num_stages=3)
    bm, bn, bk, warps = _blocks(m, e, f)
    _down_kernel[(triton.cdiv(m, bm) * triton.cdiv(e, bn),)](h, w_down, out, m, e, f, BLOCK_M=bm, BLOCK_N=bn,
                                                             BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=3)
    return out
