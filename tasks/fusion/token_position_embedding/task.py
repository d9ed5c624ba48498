"""Token + learned position embedding lookup (GPT-2's input embedding: `wte[ids] + wpe[pos]`).

Implement `token_position_embedding(input_ids, tok_emb, pos_emb, past_length=0)` for `input_ids`
of shape `[B, S]` (int64, values in [0, V)), a token table `tok_emb` `[V, E]` and a position table
`pos_emb` `[P, E]` (P >= past_length + S), returning a new tensor `[B, S, E]`:

    out[b, s, :] = tok_emb[input_ids[b, s], :] + pos_emb[past_length + s, :]
                   # float32 add, rounded once to the tables' dtype

- Both tables share a dtype (float32, float16 or bfloat16) and are contiguous, on the GPU.
  `past_length` is a Python int (the number of tokens already in the KV cache).
- Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3


def token_position_embedding(input_ids: torch.Tensor, tok_emb: torch.Tensor, pos_emb: torch.Tensor,
                             past_length: int = 0) -> torch.Tensor:
    """PyTorch reference: float32 add, one rounding to the tables' dtype."""
    s = input_ids.shape[1]
    pos = pos_emb[past_length:past_length + s].float()
    return (tok_emb[input_ids].float() + pos[None]).to(tok_emb.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 7, "v": 50, "p": 16, "e": 48, "dtype": "float32"},
    {"name": "fp16_past_small", "small": True, "b": 3, "s": 4, "v": 100, "p": 32, "e": 96, "dtype": "float16",
     "past": 20},
    {"name": "bf16_small", "small": True, "b": 1, "s": 9, "v": 37, "p": 9, "e": 200, "dtype": "bfloat16"},
    {"name": "decode_s1_small", "small": True, "b": 4, "s": 1, "v": 64, "p": 40, "e": 64, "dtype": "float32",
     "past": 39},
    {"name": "programs_small", "small": True, "b": 2, "s": 3, "v": 50, "p": 16, "e": 1100, "dtype": "float32"},
    {"name": "e1_small", "small": True, "b": 2, "s": 5, "v": 20, "p": 8, "e": 1, "dtype": "float32"},
    {"name": "fp16_gpt2_16x1024x768", "small": False, "b": 16, "s": 1024, "v": 50257, "p": 1024, "e": 768,
     "dtype": "float16"},
    {"name": "bf16_8x2048x4096", "small": False, "b": 8, "s": 2048, "v": 32000, "p": 4096, "e": 4096,
     "dtype": "bfloat16", "past": 1000},
    {"name": "fp32_32x512x1600", "small": False, "b": 32, "s": 512, "v": 50257, "p": 1024, "e": 1600,
     "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input_ids: uniform in [0, V) with the first and last ids forced to 0 and V - 1; tok_emb:
    0.5 * normal; pos_emb: 0.2 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, v, p, e = case["b"], case["s"], case["v"], case["p"], case["e"]
    ids = torch.randint(0, v, (b, s), generator=g, device=g.device)
    ids[0, 0] = 0
    ids[-1, -1] = v - 1
    dtype = getattr(torch, case["dtype"])
    tok = (0.5 * torch.randn(v, e, generator=g, device=g.device)).to(dtype)
    pos = (0.2 * torch.randn(p, e, generator=g, device=g.device)).to(dtype)
    kwargs = {"past_length": case["past"]} if "past" in case else {}
    return (ids.to(device), tok.to(device), pos.to(device)), kwargs


def _distinct(rows: int, draws: int) -> int:
    """The expected number of distinct rows among `draws` uniform draws from `rows` (each read once,
    a repeat served from cache)."""
    return round(rows * (1 - (1 - 1 / rows) ** draws)) if rows and draws else 0


def cost(case: dict) -> dict:
    """The output and the ids once; the S position rows and the distinct token rows drawn read
    once (a repeated id is served from cache). `min_bytes`: whatever ids are drawn, at least the
    two forced token ids."""
    b, s, v, e = case["b"], case["s"], case["v"], case["e"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    fixed = (b * s * e + s * e) * size + 8 * b * s
    return {"flops": b * s * e, "bytes": fixed + _distinct(v, b * s) * e * size,
            "min_bytes": fixed + min(2, v, b * s) * e * size}
