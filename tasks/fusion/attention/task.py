"""Scaled dot-product attention, non-causal (the encoder / ViT attention core): softmax(Q K^T *
scale) V, without materializing the attention matrix.

Implement `attention(q, k, v)` for `q`, `k`, `v` of shape `[B, H, S, D]`, returning a new tensor
`[B, H, S, D]` with `scale = 1 / sqrt(D)`:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale      # float32
    p[b, h, i, :] = softmax(s[b, h, i, :])
    out[b, h, i, d] = sum over j of p[b, h, i, j] * v[b, h, j, d]             # rounded to the dtype

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU. Their last dimension is
  contiguous; the other dimensions may be strided (for example `[B, S, H, D]` tensors viewed with
  `.transpose(1, 2)`). S and D are arbitrary (D <= 256, not necessarily a power of two).
- The [S, S] score matrix should not be written to memory (use an online softmax). Inputs must not
  be modified.

The result is compared with `torch.nn.functional.scaled_dot_product_attention` using rtol = atol =
1e-2 for float16 and 2e-2 for bfloat16 (flash-style kernels round P to the input dtype before the
PV product). Inputs are standard normal, so scores have unit scale.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "s": 16, "d": 16, "dtype": "float16"},
    {"name": "odd_bshd_small", "small": True, "b": 2, "h": 1, "s": 24, "d": 32, "dtype": "float16", "bshd": True},
    {"name": "d80_outliers_small", "small": True, "b": 1, "h": 2, "s": 9, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "fp16_4x32x2048x128", "small": False, "b": 4, "h": 32, "s": 2048, "d": 128, "dtype": "float16"},
    {"name": "bf16_vit_64x16x577x64_bshd", "small": False, "b": 64, "h": 16, "s": 577, "d": 64,
     "dtype": "bfloat16", "bshd": True},
    {"name": "fp16_2x32x4100x80_outliers", "small": False, "b": 2, "h": 32, "s": 4100, "d": 80,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10). With `bshd`, each is the
    `.transpose(1, 2)` view of a contiguous [B, S, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    shape = [b, s, h, d] if case.get("bshd") else [b, h, s, d]
    out = []
    for i in range(3):
        t = torch.randn(shape, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, t * 10, t)
        t = t.to(getattr(torch, case["dtype"])).to(device)
        out.append(t.transpose(1, 2) if case.get("bshd") else t)
    return tuple(out), {}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    return {"flops": 4 * b * h * s * s * d, "bytes": 2 * 4 * b * h * s * d}
