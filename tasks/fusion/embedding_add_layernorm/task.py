"""BERT input embeddings: word + position + token-type embedding lookups, summed and
layer-normalized, in one pass.

Implement `embedding_add_layernorm(input_ids, token_type_ids, word_emb, pos_emb, type_emb,
ln_weight, ln_bias, eps=1e-12)` for int64 `input_ids` and `token_type_ids` `[B, S]`, tables
`word_emb` `[V, E]`, `pos_emb` `[P, E]` (P >= S), `type_emb` `[T, E]` and LayerNorm parameters
`[E]`, returning a new tensor `[B, S, E]` (positions are 0..S-1), all in float32:

    h[b, s, :] = word_emb[input_ids[b, s]] + pos_emb[s] + type_emb[token_type_ids[b, s]]
    out[b, s, :] = (h - mean(h)) / sqrt(var(h) + eps) * ln_weight + ln_bias    # biased var, rounded

- All float tensors share a dtype (float32, float16 or bfloat16) and are contiguous, on the GPU.
  1 <= E <= 16384. The summed embeddings should not be written to memory.
- Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4


def embedding_add_layernorm(input_ids: torch.Tensor, token_type_ids: torch.Tensor, word_emb: torch.Tensor,
                            pos_emb: torch.Tensor, type_emb: torch.Tensor, ln_weight: torch.Tensor,
                            ln_bias: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the tables' dtype."""
    s = input_ids.shape[1]
    h = word_emb[input_ids].float() + pos_emb[:s].float()[None] + type_emb[token_type_ids].float()
    out = torch.nn.functional.layer_norm(h, (h.shape[-1],), ln_weight.float(), ln_bias.float(), eps)
    return out.to(word_emb.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 7, "v": 50, "p": 16, "t": 2, "e": 48, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "b": 3, "s": 5, "v": 100, "p": 8, "t": 2, "e": 96, "dtype": "float16"},
    {"name": "bf16_s1_small", "small": True, "b": 4, "s": 1, "v": 37, "p": 4, "t": 3, "e": 200,
     "dtype": "bfloat16"},
    {"name": "programs_small", "small": True, "b": 4, "s": 30, "v": 50, "p": 32, "t": 2, "e": 100, "dtype": "float32"},
    {"name": "fp16_bert_base_64x512x768", "small": False, "b": 64, "s": 512, "v": 30522, "p": 512, "t": 2,
     "e": 768, "dtype": "float16"},
    {"name": "fp32_bert_large_32x512x1024", "small": False, "b": 32, "s": 512, "v": 30522, "p": 512, "t": 2,
     "e": 1024, "dtype": "float32"},
    {"name": "bf16_16x1000x4100", "small": False, "b": 16, "s": 1000, "v": 50000, "p": 1024, "t": 4, "e": 4100,
     "dtype": "bfloat16"},
]

# Unseen cases (kbx_ray/unseen.py): E <= 16384 by contract.
SHAPES = family(most={"e": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input_ids: uniform in [0, V) with the first and last forced to 0 and V - 1; token_type_ids:
    uniform in [0, T); tables: 0.5, 0.2 and 0.1 * normal (word, position, type); ln_weight:
    1 + 0.2 * normal; ln_bias: 0.2 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, v, p, t, e = case["b"], case["s"], case["v"], case["p"], case["t"], case["e"]
    ids = torch.randint(0, v, (b, s), generator=g, device=g.device)
    ids[0, 0] = 0
    ids[-1, -1] = v - 1
    tt = torch.randint(0, t, (b, s), generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    tabs = [0.5 * torch.randn(v, e, generator=g, device=g.device), 0.2 * torch.randn(p, e, generator=g, device=g.device),
            0.1 * torch.randn(t, e, generator=g, device=g.device), 1 + 0.2 * torch.randn(e, generator=g, device=g.device),
            0.2 * torch.randn(e, generator=g, device=g.device)]
    return (ids.to(device), tt.to(device)) + tuple(x.to(dtype).to(device) for x in tabs), {}


def _distinct(rows: int, draws: int) -> int:
    """The expected number of distinct rows among `draws` uniform draws from `rows` (each read once,
    a repeat served from cache)."""
    return round(rows * (1 - (1 - 1 / rows) ** draws)) if rows and draws else 0


def cost(case: dict) -> dict:
    """The output and the ids once; every table row used read once (position rows 0..S-1, the
    type rows and the distinct word rows drawn: a repeated id is served from cache).
    `min_bytes`: whatever ids are drawn, at least the two forced word ids and one type row."""
    b, s, v, t, e = case["b"], case["s"], case["v"], case["t"], case["e"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    fixed = (b * s * e + s * e + 2 * e) * size + 16 * b * s  # output, position rows, LN params, ids
    words = min(2, v, b * s)  # ids[0, 0] = 0 and ids[-1, -1] = V - 1
    return {"flops": 10 * b * s * e, "bytes": fixed + (_distinct(v, b * s) + _distinct(t, b * s)) * e * size,
            "min_bytes": fixed + (words + 1) * e * size}
