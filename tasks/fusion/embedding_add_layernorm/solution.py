"""Triton BERT embeddings: BLOCK_M tokens per program, each row gathered from the word and type
tables by id (64-bit offsets) and from the position table by s, summed in float32 registers and
layer-normalized (two-pass statistics) before the single store (E <= 16384)."""
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
def _emb_ln_kernel(ids_ptr, tt_ptr, wte_ptr, wpe_ptr, tte_ptr, lw_ptr, lb_ptr, out_ptr, NT, S, E, eps,
                   BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    toks = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_E)
    tmask = toks < NT
    cmask = cols < E
    mask = tmask[:, None] & cmask[None, :]
    ids = tl.load(ids_ptr + toks, mask=tmask, other=0).to(tl.int64)
    tts = tl.load(tt_ptr + toks, mask=tmask, other=0).to(tl.int64)
    pos = toks % S
    h = tl.load(wte_ptr + ids[:, None] * E + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    h += tl.load(wpe_ptr + pos[:, None] * E + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    h += tl.load(tte_ptr + tts[:, None] * E + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(h, axis=1) / E
    diff = tl.where(mask, h - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / E + eps)
    lw = tl.load(lw_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    lb = tl.load(lb_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    out = diff * rstd[:, None] * lw[None, :] + lb[None, :]
    tl.store(out_ptr + toks[:, None] * E + cols[None, :], _to_out(out, out_ptr.dtype.element_ty), mask=mask)


def embedding_add_layernorm(input_ids: torch.Tensor, token_type_ids: torch.Tensor, word_emb: torch.Tensor,
                            pos_emb: torch.Tensor, type_emb: torch.Tensor, ln_weight: torch.Tensor,
                            ln_bias: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    b, s = input_ids.shape
    e = word_emb.shape[1]
    out = torch.empty((b, s, e), dtype=word_emb.dtype, device=word_emb.device)
    if out.numel() == 0:
        return out
    ids, tts = input_ids.contiguous(), token_type_ids.contiguous()
    tabs = [t.contiguous() for t in (word_emb, pos_emb, type_emb, ln_weight, ln_bias)]
    nt = b * s
    block_e = triton.next_power_of_2(e)
    block_m = min(triton.next_power_of_2(nt), max(1, 4096 // block_e))
    warps = min(16, max(1, block_m * block_e // 512))
    _emb_ln_kernel[(triton.cdiv(nt, block_m),)](ids, tts, *tabs, out, nt, s, e, eps, BLOCK_M=block_m,
                                                BLOCK_E=block_e, num_warps=warps)
    return out
