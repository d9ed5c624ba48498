"""Triton residual add + RMSNorm. Rows up to MAX_BLOCK wide: BLOCK_M rows per program held in
registers (one read of x and residual, h written once, out written once). Longer rows: one row
per program, two chunked sweeps (the second recomputes h from x and residual)."""
import torch
import triton
import triton.language as tl

MAX_BLOCK = 8192
CHUNK = 4096


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
def _add_rmsnorm_rows(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, M, D, stride_x, eps,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = (rm[:, None] < M) & (cols[None, :] < D)
    dt = out_ptr.dtype.element_ty
    x = tl.load(x_ptr + rm[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + rm[:, None] * D + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    h = _to_out(x + r, dt)
    tl.store(h_ptr + rm[:, None] * D + cols[None, :], h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=1) / D + eps)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    out = hf * rstd[:, None] * w[None, :]
    tl.store(out_ptr + rm[:, None] * D + cols[None, :], _to_out(out, dt), mask=mask)


@triton.jit
def _add_rmsnorm_long(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, D, stride_x, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    dt = out_ptr.dtype.element_ty
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
        h = _to_out(x + r, dt)
        tl.store(h_ptr + row * D + cols, h, mask=mask)
        hf = h.to(tl.float32)
        acc += hf * hf
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / D + eps)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
        hf = _to_out(x + r, dt).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * D + cols, _to_out(hf * rstd * w, dt), mask=mask)


def residual_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                         eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    h = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out, h
    x2 = x.reshape(-1, d)  # a view for contiguous and row-strided (sliced) inputs
    if x2.stride(1) != 1:
        x2 = x2.contiguous()
    r2 = residual.contiguous()
    weight = weight.contiguous()
    m = x2.shape[0]
    block_d = triton.next_power_of_2(d)
    if block_d <= MAX_BLOCK:
        block_m = min(triton.next_power_of_2(m), max(1, 4096 // block_d))
        warps = min(16, max(1, block_m * block_d // 512))
        _add_rmsnorm_rows[(triton.cdiv(m, block_m),)](x2, r2, weight, out, h, m, d, x2.stride(0), eps,
                                                      BLOCK_M=block_m, BLOCK_D=block_d, num_warps=warps)
    else:
        _add_rmsnorm_long[(m,)](x2, r2, weight, out, h, d, x2.stride(0), eps, BLOCK=CHUNK, num_warps=8)
    return out, h
