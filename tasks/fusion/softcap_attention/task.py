"""Causal attention with logit soft-capping (Gemma-2), without materializing the attention
matrix.

Implement `softcap_attention(q, k, v, softcap)` for `q`, `k`, `v` `[B, H, S, D]` and a Python float
`softcap > 0`, returning a new tensor `[B, H, S, D]` with `scale = 1 / sqrt(D)`:

    raw[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale            # float32
    s[b, h, i, j]   = softcap * tanh(raw / softcap)    if j <= i,   -inf otherwise
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, h, j, :]         # rounded

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). S and D are arbitrary (D <= 256).
- The cap is applied before the mask and the softmax; the capped scores stay in registers.
  Inputs must not be modified.

The result is compared with the float32 reference below using rtol = atol = 1e-2 for float16 and
2e-2 for bfloat16. Inputs are scaled so that many raw scores exceed the cap's linear range.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def softcap_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softcap: float) -> torch.Tensor:
    """PyTorch reference, in float32."""
    s_len, d = q.shape[-2], q.shape[-1]
    raw = (q.float() @ k.float().transpose(-1, -2)) * d ** -0.5
    s = softcap * torch.tanh(raw / softcap)
    causal = torch.ones(s_len, s_len, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~causal, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "s": 32, "d": 16, "cap": 5.0, "dtype": "float16"},
    {"name": "odd_bshd_small", "small": True, "b": 2, "h": 1, "s": 19, "d": 32, "cap": 3.0, "dtype": "float16",
     "bshd": True},
    {"name": "outliers_small", "small": True, "b": 1, "h": 2, "s": 12, "d": 64, "cap": 50.0, "dtype": "float16",
     "outliers": True},
    {"name": "blocks_small", "small": True, "b": 1, "h": 1, "s": 150, "d": 16, "cap": 5.0, "dtype": "float16"},
    {"name": "bf16_gemma2_2x16x4096x256", "small": False, "b": 2, "h": 16, "s": 4096, "d": 256, "cap": 50.0,
     "dtype": "bfloat16"},
    {"name": "fp16_4x32x2048x128_bshd", "small": False, "b": 4, "h": 32, "s": 2048, "d": 128, "cap": 20.0,
     "dtype": "float16", "bshd": True},
    {"name": "fp16_4x8x3000x128_outliers", "small": False, "b": 4, "h": 8, "s": 3000, "d": 128, "cap": 30.0,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k: 2.5 * standard normal (raw scores of std about 6; outliers: 0.1% scaled by 10); v:
    standard normal. With `bshd`, each is the `.transpose(1, 2)` view of a contiguous
    [B, S, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    shape = [b, s, h, d] if case.get("bshd") else [b, h, s, d]
    out = []
    for i in range(3):
        t = torch.randn(shape, generator=g, device=g.device) * (2.5 if i < 2 else 1.0)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, t * 10, t)
        t = t.to(getattr(torch, case["dtype"])).to(device)
        out.append(t.transpose(1, 2) if case.get("bshd") else t)
    return tuple(out) + (case["cap"],), {}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    return {"flops": 2 * b * h * s * s * d + 5 * b * h * s * s, "bytes": 2 * 4 * b * h * s * d}
