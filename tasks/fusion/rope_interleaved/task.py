"""Rotary position embedding, interleaved (GPT-J / original LLaMA complex-multiply) style.

Implement `rope_interleaved(x, cos, sin)` for `x` of shape `[B, S, H, D]` (D even) and float32
tables `cos`, `sin` of shape `[S, D // 2]` (the angles for positions 0..S-1 of this chunk). Features
are rotated in adjacent pairs (x[2i], x[2i+1]), i.e. the complex product
(x[2i] + j x[2i+1]) * (cos[s, i] + j sin[s, i]). For every b, s, h and i < D // 2 (float32 math,
rounded once to the dtype):

    out[b, s, h, 2i]     = x[b, s, h, 2i] * cos[s, i] - x[b, s, h, 2i+1] * sin[s, i]
    out[b, s, h, 2i + 1] = x[b, s, h, 2i+1] * cos[s, i] + x[b, s, h, 2i] * sin[s, i]

- `x` has dtype float32, float16 or bfloat16, on the GPU. Its last dimension is contiguous; the
  other three may have arbitrary strides (for example a `[B, H, S, D]` tensor viewed as
  `[B, S, H, D]` with `.transpose(1, 2)`).
- Return a new contiguous tensor of shape `[B, S, H, D]` and the dtype of x. Inputs must not be
  modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    xf = x.float().reshape(*x.shape[:-1], -1, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    out = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1)
    return out.reshape(x.shape).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 5, "h": 3, "d": 16, "dtype": "float32"},
    {"name": "bf16_small", "small": True, "b": 1, "s": 7, "h": 2, "d": 64, "dtype": "bfloat16"},
    {"name": "fp16_bhsd_outliers_small", "small": True, "b": 2, "s": 6, "h": 4, "d": 24, "dtype": "float16",
     "bhsd": True, "outliers": True},
    {"name": "s1_small", "small": True, "b": 4, "s": 1, "h": 8, "d": 32, "dtype": "float32"},
    {"name": "programs_small", "small": True, "b": 2, "s": 10, "h": 4, "d": 64, "dtype": "float32"},
    {"name": "bf16_4x4096x32x128", "small": False, "b": 4, "s": 4096, "h": 32, "d": 128, "dtype": "bfloat16"},
    {"name": "fp16_bhsd_8x2048x40x128_outliers", "small": False, "b": 8, "s": 2048, "h": 40, "d": 128,
     "dtype": "float16", "bhsd": True, "outliers": True},
    {"name": "fp32_2x8192x16x96", "small": False, "b": 2, "s": 8192, "h": 16, "d": 96, "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): D stays even (rotated in pairs).
SHAPES = family(multiple={"d": 2})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); cos/sin: the standard RoPE angles for base
    10000 at positions start..start+S-1 with a random start. With `bhsd`, x is the
    `.transpose(1, 2)` view of a contiguous [B, H, S, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, h, d = case["b"], case["s"], case["h"], case["d"]
    shape = [b, h, s, d] if case.get("bhsd") else [b, s, h, d]
    x = normal(g, shape, case.get("outliers"))
    start = int(torch.randint(0, 1000, (1,), generator=g, device=g.device))
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
    ang = torch.arange(start, start + s, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("bhsd"):
        x = x.transpose(1, 2)
    return (x, ang.cos().float().to(device), ang.sin().float().to(device)), {}


def cost(case: dict) -> dict:
    b, s, h, d = case["b"], case["s"], case["h"], case["d"]
    n = b * s * h * d
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * n, "bytes": 2 * n * size + 4 * s * d}
