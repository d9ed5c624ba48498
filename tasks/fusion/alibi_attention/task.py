"""Causal attention with ALiBi position biases (BLOOM / MPT style), without materializing the
attention matrix or the bias tensor.

Implement `alibi_attention(q, k, v, slopes)` for `q`, `k`, `v` `[B, H, S, D]` and per-head float32
`slopes` `[H]`, returning a new tensor `[B, H, S, D]` with `scale = 1 / sqrt(D)`:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale - slopes[h] * (i - j)
                    for j <= i, and -inf for j > i                               # float32
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, h, j, :]    # rounded

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). S and D are arbitrary (D <= 256). The bias is
  computed in float32 from the slope and the positions, never stored. Inputs must not be modified.

The result is compared with the float32 reference below using rtol = atol = 1e-2 for float16 and
2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def alibi_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """PyTorch reference, in float32."""
    s_len, d = q.shape[-2], q.shape[-1]
    s = (q.float() @ k.float().transpose(-1, -2)) * d ** -0.5
    pos = torch.arange(s_len, device=q.device)
    dist = (pos[:, None] - pos[None, :]).float()
    s = s - slopes[None, :, None, None] * dist
    s = s.masked_fill(dist < 0, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "s": 16, "d": 16, "dtype": "float16"},
    {"name": "odd_small", "small": True, "b": 1, "h": 2, "s": 23, "d": 32, "dtype": "float16"},
    {"name": "d80_outliers_small", "small": True, "b": 1, "h": 2, "s": 12, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "blocks_small", "small": True, "b": 1, "h": 2, "s": 150, "d": 16, "dtype": "float16"},
    {"name": "fp16_bloom_2x32x2048x128", "small": False, "b": 2, "h": 32, "s": 2048, "d": 128,
     "dtype": "float16"},
    {"name": "bf16_mpt_8x16x1024x64", "small": False, "b": 8, "h": 16, "s": 1024, "d": 64, "dtype": "bfloat16"},
    {"name": "fp16_2x24x3000x96_outliers", "small": False, "b": 2, "h": 24, "s": 3000, "d": 96,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10); slopes: the standard ALiBi
    geometric sequence 2 ** (-8 (h + 1) / H)."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    dtype = getattr(torch, case["dtype"])
    out = []
    for i in range(3):
        t = torch.randn(b, h, s, d, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(b, h, s, d, generator=g, device=g.device) < 0.001, t * 10, t)
        out.append(t.to(dtype).to(device))
    slopes = 2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=torch.float32, device=device) / h)
    return tuple(out) + (slopes.to(device),), {}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    return {"flops": 2 * b * h * s * s * d, "bytes": 2 * 4 * b * h * s * d + 4 * h}
