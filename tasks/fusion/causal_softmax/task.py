"""Scaled causal softmax over attention scores (the unfused attention path of GPT-style models,
including the decode/chunked-prefill case where queries are the last Sq of Sk positions).

Implement `causal_softmax(scores, scale)` for scores of shape `[B, H, Sq, Sk]` with Sq <= Sk. The
queries are the last Sq positions of the key sequence (bottom-right aligned), so query row i may
attend to key j if and only if `j <= i + (Sk - Sq)`. All in float32, rounded once to the dtype:

    s[b, h, i, j]   = scores[b, h, i, j] * scale     if j <= i + Sk - Sq,   else -inf
    out[b, h, i, :] = softmax(s[b, h, i, :])          # masked positions are exactly 0

- `scores` has dtype float32, float16 or bfloat16, on the GPU. Its last dimension is contiguous;
  the other dimensions may be strided. `scale` is a Python float. 1 <= Sk <= 16384.
- Return a new tensor with the shape and dtype of `scores`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def causal_softmax(scores: torch.Tensor, scale: float) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    sq, sk = scores.shape[-2], scores.shape[-1]
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=scores.device).tril(diagonal=sk - sq)
    s = (scores.float() * scale).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1).to(scores.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "h": 2, "sq": 8, "sk": 8, "dtype": "float32"},
    {"name": "fp16_chunk_small", "small": True, "b": 1, "h": 3, "sq": 5, "sk": 40, "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "b": 2, "h": 2, "sq": 12, "sk": 12, "dtype": "bfloat16",
     "outliers": True},
    {"name": "sq1_small", "small": True, "b": 3, "h": 4, "sq": 1, "sk": 77, "dtype": "float32"},
    {"name": "head_strided_small", "small": True, "b": 2, "h": 3, "sq": 6, "sk": 6, "dtype": "float32",
     "strided": True},
    {"name": "programs_small", "small": True, "b": 2, "h": 2, "sq": 40, "sk": 100, "dtype": "float32"},
    {"name": "fp16_4x16x2048x2048", "small": False, "b": 4, "h": 16, "sq": 2048, "sk": 2048, "dtype": "float16"},
    {"name": "bf16_2x32x1024x3000_outliers", "small": False, "b": 2, "h": 32, "sq": 1024, "sk": 3000,
     "dtype": "bfloat16", "outliers": True},
    {"name": "fp32_strided_8x12x1024x1024", "small": False, "b": 8, "h": 12, "sq": 1024, "sk": 1024,
     "dtype": "float32", "strided": True},
]

# Unseen cases (kbx_ray/unseen.py): Sk <= 16384 and Sq <= Sk by contract.
SHAPES = family(most={"sk": 16384}, order=(("sq", "sk"),))


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """scores: 3 * standard normal (outliers: 0.1% scaled by 10); scale = 1 / sqrt(64). With
    `strided`, scores is the `.transpose(1, 2)` view of a contiguous [B, Sq, H, Sk] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, sq, sk = case["b"], case["h"], case["sq"], case["sk"]
    shape = [b, sq, h, sk] if case.get("strided") else [b, h, sq, sk]
    scores = normal(g, shape, case.get("outliers"), 3)
    scores = scores.to(getattr(torch, case["dtype"])).to(device)
    if case.get("strided"):
        scores = scores.transpose(1, 2)
    return (scores, 0.125), {}


def cost(case: dict) -> dict:
    """The whole output is written; only the unmasked scores (j <= i + Sk - Sq) need reading."""
    b, h, sq, sk = case["b"], case["h"], case["sq"], case["sk"]
    n = b * h * sq * sk
    kept = b * h * sum(max(0, min(sk, i + sk - sq + 1)) for i in range(sq))
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 5 * kept, "bytes": (n + kept) * size}
