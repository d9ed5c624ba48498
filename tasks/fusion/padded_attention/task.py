"""Attention over a padded batch with a key-padding mask (BERT-style encoder attention on
right-padded sequences), without materializing the attention matrix.

Implement `padded_attention(q, k, v, key_lengths)` for `q`, `k`, `v` `[B, H, S, D]` and an int64
tensor `key_lengths` `[B]` (1 <= key_lengths[b] <= S), returning a new tensor `[B, H, S, D]` with
`scale = 1 / sqrt(D)`; every query (padding positions included) attends to the first
`key_lengths[b]` keys of its sequence only:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale   if j < key_lengths[b]
                  = -inf                                                   otherwise
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, h, j, :]   # rounded

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). S and D are arbitrary (D <= 256).
- Skip the key blocks past a sequence's length. Inputs must not be modified.

The result is compared with `scaled_dot_product_attention` with the boolean key mask, using
rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
STRUCTURE = ("key_lengths",)  # each sequence's key count: how many key blocks the grid visits
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def padded_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_lengths: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    s = k.shape[2]
    keep = torch.arange(s, device=q.device)[None, :] < key_lengths[:, None]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])


CASES = [
    {"name": "fp16_small", "small": True, "b": 2, "h": 2, "s": 16, "d": 16, "dtype": "float16"},
    {"name": "odd_len1_small", "small": True, "b": 3, "h": 1, "s": 21, "d": 32, "dtype": "float16",
     "force_len1": True},
    {"name": "d80_outliers_small", "small": True, "b": 2, "h": 1, "s": 12, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "fp16_bert_64x16x512x64", "small": False, "b": 64, "h": 16, "s": 512, "d": 64, "dtype": "float16"},
    {"name": "bf16_16x32x2048x128", "small": False, "b": 16, "h": 32, "s": 2048, "d": 128, "dtype": "bfloat16"},
    {"name": "fp16_32x12x1000x64_len1_outliers", "small": False, "b": 32, "h": 12, "s": 1000, "d": 64,
     "dtype": "float16", "outliers": True, "force_len1": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10); key_lengths: uniform in
    [1, S], sequence 0 always full length (and, with `force_len1`, sequence 1 of length 1)."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    dtype = getattr(torch, case["dtype"])
    out = []
    for i in range(3):
        t = torch.randn(b, h, s, d, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(b, h, s, d, generator=g, device=g.device) < 0.001, t * 10, t)
        out.append(t.to(dtype).to(device))
    lengths = torch.randint(1, s + 1, (b,), generator=g, device=g.device)
    lengths[0] = s
    if case.get("force_len1"):
        lengths[1] = 1
    return tuple(out) + (lengths.to(device),), {}


def _tokens(b: int, top: int, len1: bool) -> tuple[int, int]:
    """(expected, least) total of the drawn lengths: sequence 0 at `top`, sequence 1 at 1 with
    `len1`, the others uniform in [1, top]."""
    fixed, rest = top + int(len1), b - 1 - int(len1)
    return fixed + rest * (top + 1) // 2, fixed + rest


def cost(case: dict) -> dict:
    """q and the output whole; keys and values only up to each sequence's length (the key blocks
    past it are skipped): the expected lengths, and (`min_bytes`, `min_flops`) the least any draw
    gives."""
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    mean, least = _tokens(b, s, bool(case.get("force_len1")))
    return {"flops": 4 * h * s * mean * d, "bytes": 2 * (2 * b * h * s * d + 2 * h * mean * d) + 8 * b,
            "min_flops": 4 * h * s * least * d, "min_bytes": 2 * (2 * b * h * s * d + 2 * h * least * d) + 8 * b}
