"""Triton gated group RMSNorm: the input is seen as rows of one group (G elements); BLOCK_M group
rows per program, held in registers; z is addressed through its own row stride."""
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
def _rmsnorm_gated_kernel(x_ptr, z_ptr, w_ptr, out_ptr, R, G, NG, stride_z, eps,
                          BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)  # group rows
    cols = tl.arange(0, BLOCK_G)
    mask = (rows[:, None] < R) & (cols[None, :] < G)
    tok = rows // NG
    grp = rows % NG
    x = tl.load(x_ptr + rows[:, None] * G + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + (tok * stride_z + grp * G)[:, None] + cols[None, :], mask=mask, other=0.0)
    z = z.to(tl.float32)
    y = x * z / (1.0 + tl.exp(-z))
    rstd = 1.0 / tl.sqrt(tl.sum(y * y, axis=1) / G + eps)
    w = tl.load(w_ptr + (grp * G)[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    out = y * rstd[:, None] * w
    tl.store(out_ptr + rows[:, None] * G + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def rmsnorm_gated(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, group_size: int,
                  eps: float = 1e-5) -> torch.Tensor:
    d = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x = x.contiguous()
    z2 = z.reshape(-1, d)  # a view for contiguous and row-strided (sliced) inputs
    if z2.stride(1) != 1:
        z2 = z2.contiguous()
    weight = weight.contiguous()
    ng = d // group_size
    r = x.numel() // group_size
    block_g = triton.next_power_of_2(group_size)
    block_m = min(triton.next_power_of_2(r), max(1, 4096 // block_g))
    warps = min(16, max(1, block_m * block_g // 512))
    _rmsnorm_gated_kernel[(triton.cdiv(r, block_m),)](x, z2, weight, out, r, group_size, ng, z2.stride(0), eps,
                                                      BLOCK_M=block_m, BLOCK_G=block_g, num_warps=warps)
    return out
