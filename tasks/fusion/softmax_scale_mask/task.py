"""Scaled, masked softmax over attention scores (the unfused attention path of BERT-style models).

Implement `softmax_scale_mask(scores, mask, scale)` for attention scores `scores` of shape
`[B, H, Sq, Sk]` and a boolean keep-mask `mask` of shape `[B, 1, Sq, Sk]` (True = attend), shared
by all heads. All in float32, rounded once to the dtype of `scores`:

    s[b, h, i, j] = scores[b, h, i, j] * scale        if mask[b, 0, i, j]
                  = -inf                               otherwise
    out[b, h, i, :] = softmax(s[b, h, i, :])
    a row whose mask is entirely False gives all zeros (not NaN).

- `scores` is contiguous with dtype float32, float16 or bfloat16, on the GPU; `mask` is a
  contiguous bool tensor; `scale` is a Python float. 1 <= Sk <= 16384.
- Return a new tensor with the shape and dtype of `scores`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def softmax_scale_mask(scores: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """PyTorch reference: float32 math, fully masked rows set to zero, one rounding."""
    s = (scores.float() * scale).masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.where(mask.any(dim=-1, keepdim=True), p, torch.zeros_like(p))
    return p.to(scores.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "h": 2, "sq": 8, "sk": 8, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "b": 1, "h": 3, "sq": 5, "sk": 40, "dtype": "float16"},
    {"name": "bf16_outliers_empty_row_small", "small": True, "b": 2, "h": 2, "sq": 6, "sk": 33,
     "dtype": "bfloat16", "outliers": True, "empty_row": True},
    {"name": "sq1_small", "small": True, "b": 3, "h": 4, "sq": 1, "sk": 77, "dtype": "float32"},
    {"name": "programs_small", "small": True, "b": 2, "h": 2, "sq": 40, "sk": 100, "dtype": "float32"},
    {"name": "fp16_4x16x1024x1024", "small": False, "b": 4, "h": 16, "sq": 1024, "sk": 1024, "dtype": "float16"},
    {"name": "bf16_2x32x512x2000_outliers", "small": False, "b": 2, "h": 32, "sq": 512, "sk": 2000,
     "dtype": "bfloat16", "outliers": True, "empty_row": True},
    {"name": "fp32_8x12x512x512", "small": False, "b": 8, "h": 12, "sq": 512, "sk": 512, "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): Sk <= 16384 by contract.
SHAPES = family(most={"sk": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """scores: 3 * standard normal (outliers: 0.1% scaled by 10); mask: key padding (each sequence
    keeps a random prefix of keys, at least one) combined with 10% random dropped positions;
    scale = 1 / sqrt(64). With `empty_row`, query row 1 of sequence 0 is fully masked."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, sq, sk = case["b"], case["h"], case["sq"], case["sk"]
    scores = normal(g, [b, h, sq, sk], case.get("outliers"), 3)
    lengths = torch.randint(1, sk + 1, (b,), generator=g, device=g.device)
    keep = torch.arange(sk, device=device)[None, None, :] < lengths[:, None, None]
    keep = keep & (torch.rand(b, sq, sk, generator=g, device=g.device) >= 0.1)
    keep[:, :, 0] = True
    if case.get("empty_row"):
        keep[0, 1, :] = False
    mask = keep[:, None, :, :]
    return (scores.to(getattr(torch, case["dtype"])).to(device), mask.to(device), 0.125), {}


def cost(case: dict) -> dict:
    b, h, sq, sk = case["b"], case["h"], case["sq"], case["sk"]
    n = b * h * sq * sk
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: masked scores need not be read; the mask keeps key 0 of every row (but the
    # empty one) and may drop every other key
    rows = b * h * sq - (h if case.get("empty_row") else 0)
    return {"flops": 5 * n, "bytes": 2 * n * size + b * sq * sk, "min_bytes": (n + rows) * size + b * sq * sk}
