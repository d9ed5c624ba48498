"""Triton RMSNorm + per-token int8 quantization: BLOCK_M rows per program, each row whole in
registers (N <= 16384). The normalized row y stays in registers; its absmax gives the scale, and
q = rint(y / scale) (IEEE division, round-half-even through the 1.5 * 2**23 trick on a value
already clamped to [-127, 127]) is stored as int8 with the float32 scale."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_quant_kernel(x_ptr, w_ptr, q_ptr, s_ptr, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    amax = tl.max(tl.where(mask, tl.abs(y), 0.0), axis=1)
    scale = tl.maximum(amax, 1e-10) / 127.0
    v = tl.math.div_rn(y, tl.broadcast_to(scale[:, None], y.shape))
    v = tl.minimum(tl.maximum(v, -127.0), 127.0)
    r = (v + 12582912.0) - 12582912.0          # round half to even (|v| <= 127)
    tl.store(q_ptr + rows[:, None] * N + cols[None, :], r.to(tl.int8), mask=mask)
    tl.store(s_ptr + rows, scale, mask=rmask)


def rmsnorm_dynamic_quant(x: torch.Tensor, weight: torch.Tensor,
                          eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    q = torch.empty((m, n), dtype=torch.int8, device=x.device)
    scale = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    if q.numel() == 0:
        return q, scale
    x, weight = x.contiguous(), weight.contiguous()
    block_n = triton.next_power_of_2(n)
    block_m = min(triton.next_power_of_2(m), max(1, 4096 // block_n))
    warps = min(16, max(1, block_m * block_n // 512))
    _rmsnorm_quant_kernel[(triton.cdiv(m, block_m),)](x, weight, q, scale, m, n, eps, BLOCK_M=block_m,
                                                      BLOCK_N=block_n, num_warps=warps)
    return q, scale
