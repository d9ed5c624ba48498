"""Fused LayerNorm + exact GELU.

Implement `layernorm_gelu(x, weight, bias, eps=1e-5)`. With `D = x.shape[-1]`, every row is
normalized independently and passed through the exact (erf) GELU, all in float32:

    mean = sum(r) / D
    var  = sum((r - mean) ** 2) / D                      # biased variance
    y    = (r - mean) / sqrt(var + eps) * weight + bias
    out  = 0.5 * y * (1 + erf(y / sqrt(2)))              # rounded once to x.dtype

- `x` has shape `[..., D]` and dtype float32, float16 or bfloat16, on the GPU; `weight` and `bias`
  have shape `[D]` and the dtype of `x`. The last dimension of `x` is contiguous, but its rows need
  not be adjacent (for example a column slice of a wider tensor). 1 <= D <= 16384, not necessarily
  a power of two.
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def layernorm_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps)
    return torch.nn.functional.gelu(y).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 5, 512], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [6, 700], "dtype": "bfloat16", "outliers": True},
    {"name": "sliced_small", "small": True, "shape": [12, 200], "dtype": "float32", "sliced": True},
    {"name": "one_row_small", "small": True, "shape": [1, 4097], "dtype": "float32", "eps": 1e-3},
    {"name": "fp32_8192x4096", "small": False, "shape": [8192, 4096], "dtype": "float32"},
    {"name": "fp16_16x1024x2560_outliers", "small": False, "shape": [16, 1024, 2560], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_sliced_16384x3000", "small": False, "shape": [16384, 3000], "dtype": "bfloat16",
     "sliced": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 16384 by contract.
SHAPES = family(most={"shape.-1": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets in [0, 2) and scales in [0.5, 2) (outliers: 0.1% scaled by
    10); weight: 1 + 0.5 * normal; bias: 0.5 * normal. A sliced x is the first D columns of a
    tensor 7 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 7] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(full[:-1] + [1], generator=g, device=g.device)) + 2 * torch.rand(full[:-1] + [1], generator=g, device=g.device)
    weight = 1 + 0.5 * torch.randn(d, generator=g, device=g.device)
    bias = 0.5 * torch.randn(d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, weight, bias = (t.to(dtype).to(device) for t in (x, weight, bias))
    if case.get("sliced"):
        x = x[..., :d]
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, weight, bias), kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 16 * n, "bytes": (2 * n + 2 * case["shape"][-1]) * size}
