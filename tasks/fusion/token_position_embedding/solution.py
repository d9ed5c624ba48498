"""Triton token + position embedding: a grid of (token block, feature block) programs; each token
row gathers its table row by id (64-bit offsets, the vocabulary table can exceed 2**31 bytes) and
adds the position row of (past_length + s)."""
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
def _embed_kernel(ids_ptr, tok_ptr, pos_ptr, out_ptr, NT, S, E, past,
                  BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    toks = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_E + tl.arange(0, BLOCK_E)
    tmask = toks < NT
    mask = tmask[:, None] & (cols[None, :] < E)
    ids = tl.load(ids_ptr + toks, mask=tmask, other=0).to(tl.int64)
    prow = (toks % S) + past
    t = tl.load(tok_ptr + ids[:, None] * E + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    p = tl.load(pos_ptr + prow[:, None] * E + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + toks[:, None] * E + cols[None, :], _to_out(t + p, out_ptr.dtype.element_ty), mask=mask)


def token_position_embedding(input_ids: torch.Tensor, tok_emb: torch.Tensor, pos_emb: torch.Tensor,
                             past_length: int = 0) -> torch.Tensor:
    b, s = input_ids.shape
    e = tok_emb.shape[1]
    out = torch.empty((b, s, e), dtype=tok_emb.dtype, device=tok_emb.device)
    if out.numel() == 0:
        return out
    ids = input_ids.contiguous()
    tok_emb, pos_emb = tok_emb.contiguous(), pos_emb.contiguous()
    nt = b * s
    block_e = min(triton.next_power_of_2(e), 1024)
    block_t = min(triton.next_power_of_2(nt), max(1, 4096 // block_e))
    grid = (triton.cdiv(nt, block_t), triton.cdiv(e, block_e))
    _embed_kernel[grid](ids, tok_emb, pos_emb, out, nt, s, e, past_length, BLOCK_T=block_t, BLOCK_E=block_e,
                        num_warps=8)
    return out
