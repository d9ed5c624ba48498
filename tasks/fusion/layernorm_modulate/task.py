"""Adaptive LayerNorm modulation (the adaLN block of diffusion transformers such as DiT):
LayerNorm without affine parameters, then a per-sample scale and shift.

Implement `layernorm_modulate(x, shift, scale, eps=1e-6)` for `x` of shape `[B, S, D]` and
`shift`, `scale` of shape `[B, D]`. Every row `x[b, s, :]` is normalized independently, all in
float32:

    mean = sum(r) / D
    var  = sum((r - mean) ** 2) / D                          # biased variance
    out[b, s, :] = (r - mean) / sqrt(var + eps) * (1 + scale[b]) + shift[b]    # rounded once

- `x`, `shift` and `scale` share a dtype (float32, float16 or bfloat16), on the GPU. `x` is
  contiguous. The last dimension of `shift` and `scale` is contiguous, but their rows need not be
  adjacent: in DiT they are column chunks of one `[B, 6 * D]` modulation tensor.
  1 <= D <= 16384, not necessarily a power of two.
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def layernorm_modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor,
                       eps: float = 1e-6) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), eps=eps)
    out = y * (1 + scale.float()[:, None, :]) + shift.float()[:, None, :]
    return out.to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 12, "d": 100, "dtype": "float32"},
    {"name": "fp16_chunked_small", "small": True, "b": 3, "s": 4, "d": 256, "dtype": "float16", "chunked": True},
    {"name": "bf16_outliers_small", "small": True, "b": 1, "s": 6, "d": 576, "dtype": "bfloat16",
     "outliers": True},
    {"name": "s1_chunked_small", "small": True, "b": 5, "s": 1, "d": 384, "dtype": "float32", "chunked": True},
    {"name": "shift_chunked_small", "small": True, "b": 2, "s": 5, "d": 96, "dtype": "float32", "chunked": "shift"},
    {"name": "bf16_dit_xl_32x1024x1152", "small": False, "b": 32, "s": 1024, "d": 1152, "dtype": "bfloat16",
     "chunked": True},
    {"name": "fp16_8x4096x1536_outliers", "small": False, "b": 8, "s": 4096, "d": 1536, "dtype": "float16",
     "outliers": True, "chunked": True},
    {"name": "fp32_4x4096x3072", "small": False, "b": 4, "s": 4096, "d": 3072, "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): D <= 16384 by contract.
SHAPES = family(most={"d": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets in [0, 2) and scales in [0.5, 2) (outliers: 0.1% scaled by
    10); shift: 0.5 * normal; scale: 0.5 * normal. With `chunked`, shift and scale are chunks 0 and
    1 of a contiguous [B, 6 * D] tensor (`chunked: "shift"`: scale is a contiguous copy)."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, d = case["b"], case["s"], case["d"]
    x = normal(g, [b, s, d], case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(b, s, 1, generator=g, device=g.device)) + 2 * torch.rand(b, s, 1, generator=g, device=g.device)
    mod = 0.5 * torch.randn(b, 6 * d if case.get("chunked") else 2 * d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, mod = x.to(dtype).to(device), mod.to(dtype).to(device)
    if case.get("chunked"):
        shift, scale = mod[:, :d], mod[:, d:2 * d]
        if case["chunked"] == "shift":
            scale = scale.contiguous()
    else:
        shift, scale = mod[:, :d].contiguous(), mod[:, d:].contiguous()
    return (x, shift, scale), {}


def cost(case: dict) -> dict:
    b, s, d = case["b"], case["s"], case["d"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 9 * b * s * d, "bytes": (2 * b * s * d + 2 * b * d) * size}
