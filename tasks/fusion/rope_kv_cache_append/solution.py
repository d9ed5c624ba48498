"""Triton RoPE + paged KV-cache write in two launches over (token, head) rows, BLOCK_M head
vectors per program, read through the token/head strides (views into a fused QKV buffer need no
copy). Each feature loads its rotation partner (i +- D/2) alongside and the cos/sin of its
token's position. Launch 1 rotates q into the new output; launch 2 rotates k and copies v
straight into their cache slots (rows of padding tokens are masked out of the stores)."""
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
def _rope_tile(x_ptr, src, cols, mask, pos, cos_ptr, sin_ptr, D):
    half = D // 2
    first = cols < half
    partner = tl.where(first, cols + half, cols - half)
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(x_ptr + src[:, None] + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    fi = tl.where(first, cols, cols - half)
    c = tl.load(cos_ptr + pos[:, None] * half + fi[None, :], mask=mask, other=1.0)
    s = tl.load(sin_ptr + pos[:, None] * half + fi[None, :], mask=mask, other=0.0)
    sign = tl.where(first, -1.0, 1.0)
    return x * c + sign[None, :] * xp * s


@triton.jit
def _rope_q_kernel(q_ptr, cos_ptr, sin_ptr, pos_ptr, out_ptr, NR, H, D, sqt, sqh,
                   BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < NR
    mask = rmask[:, None] & (cols[None, :] < D)
    tok = rows // H
    pos = tl.load(pos_ptr + tok, mask=rmask, other=0)
    out = _rope_tile(q_ptr, tok * sqt + (rows % H) * sqh, cols, mask, pos, cos_ptr, sin_ptr, D)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kv_write_kernel(k_ptr, v_ptr, cos_ptr, sin_ptr, pos_ptr, slot_ptr, kc_ptr, vc_ptr, NR, H, D,
                          skt, skh, svt, svh, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < NR
    cmask = cols < D
    tok = rows // H
    hi = rows % H
    slot = tl.load(slot_ptr + tok, mask=rmask, other=-1)
    live = rmask & (slot >= 0)
    mask = live[:, None] & cmask[None, :]
    pos = tl.load(pos_ptr + tok, mask=live, other=0)
    kr = _rope_tile(k_ptr, tok * skt + hi * skh, cols, mask, pos, cos_ptr, sin_ptr, D)
    dst = (slot * H + hi)[:, None] * D + cols[None, :]
    tl.store(kc_ptr + dst, _to_out(kr, kc_ptr.dtype.element_ty), mask=mask)
    vv = tl.load(v_ptr + (tok * svt + hi * svh)[:, None] + cols[None, :], mask=mask)
    tl.store(vc_ptr + dst, vv, mask=mask)


def _blocks(nr: int, d: int) -> tuple[int, int, int]:
    block_d = triton.next_power_of_2(d)
    block_m = min(triton.next_power_of_2(nr), max(1, 4096 // block_d))
    return block_m, block_d, min(8, max(1, block_m * block_d // 512))


def rope_kv_cache_append(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         positions: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         slot_mapping: torch.Tensor) -> torch.Tensor:
    t, hq, d = q.shape
    hk = k.shape[1]
    q_out = torch.empty((t, hq, d), dtype=q.dtype, device=q.device)
    if t == 0:
        return q_out
    q, k, v = (x if x.stride(2) == 1 else x.contiguous() for x in (q, k, v))
    cos, sin = cos.contiguous(), sin.contiguous()
    positions, slot_mapping = positions.contiguous(), slot_mapping.contiguous()
    bm, bd, warps = _blocks(t * hq, d)
    _rope_q_kernel[(triton.cdiv(t * hq, bm),)](q, cos, sin, positions, q_out, t * hq, hq, d, q.stride(0),
                                               q.stride(1), BLOCK_M=bm, BLOCK_D=bd, num_warps=warps)
    bm, bd, warps = _blocks(t * hk, d)
    _rope_kv_write_kernel[(triton.cdiv(t * hk, bm),)](k, v, cos, sin, positions, slot_mapping, key_cache,
                                                      value_cache, t * hk, hk, d, k.stride(0), k.stride(1),
                                                      v.stride(0), v.stride(1), BLOCK_M=bm, BLOCK_D=bd,
                                                      num_warps=warps)
    return q_out
