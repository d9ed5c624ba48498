"""Fused bias + residual add + LayerNorm (the post-LN "output" block of BERT-style encoders:
dense-layer bias, residual connection, LayerNorm).

Implement `bias_residual_layernorm(x, bias, residual, ln_weight, ln_bias, eps=1e-12)`. With
`D = x.shape[-1]`, every row is processed independently, all in float32:

    h    = x + bias + residual                    # bias [D] broadcast over the rows
    mean = sum(h) / D
    var  = sum((h - mean) ** 2) / D               # biased variance, as in torch.nn.LayerNorm
    out  = (h - mean) / sqrt(var + eps) * ln_weight + ln_bias      # rounded once to x.dtype

- `x` and `residual` have shape `[..., D]` and the same dtype (float32, float16 or bfloat16), on
  the GPU; `bias`, `ln_weight`, `ln_bias` have shape `[D]` and the same dtype. All are
  contiguous. 1 <= D <= 16384, not necessarily a power of two.
- Return one new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def bias_residual_layernorm(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor,
                            ln_weight: torch.Tensor, ln_bias: torch.Tensor,
                            eps: float = 1e-12) -> torch.Tensor:
    """PyTorch reference: everything in float32, one rounding at the end."""
    h = x.float() + bias.float() + residual.float()
    out = torch.nn.functional.layer_norm(h, (h.shape[-1],), ln_weight.float(), ln_bias.float(), eps)
    return out.to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 6, 384], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [4, 1000], "dtype": "bfloat16", "outliers": True},
    {"name": "one_row_small", "small": True, "shape": [1, 3000], "dtype": "float32", "eps": 1e-5},
    {"name": "fp16_32x512x768", "small": False, "shape": [32, 512, 768], "dtype": "float16"},
    {"name": "fp32_16384x1024_outliers", "small": False, "shape": [16384, 1024], "dtype": "float32",
     "outliers": True},
    {"name": "bf16_8192x4100", "small": False, "shape": [8192, 4100], "dtype": "bfloat16"},
    {"name": "fp16_2048x16384", "small": False, "shape": [2048, 16384], "dtype": "float16"},
]

# Unseen cases (kbx_ray/unseen.py): D <= 16384 by contract.
SHAPES = family(most={"shape.-1": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets in [0, 2) and scales in [0.5, 2) (outliers: 0.1% scaled by
    10); bias: 0.5 * normal; residual: standard normal; ln_weight: 1 + 0.3 * normal; ln_bias:
    0.5 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    x = normal(g, shape, case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(shape[:-1] + [1], generator=g, device=g.device)) + 2 * torch.rand(shape[:-1] + [1], generator=g, device=g.device)
    bias = 0.5 * torch.randn(d, generator=g, device=g.device)
    residual = torch.randn(shape, generator=g, device=g.device)
    ln_weight = 1 + 0.3 * torch.randn(d, generator=g, device=g.device)
    ln_bias = 0.5 * torch.randn(d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    args = tuple(t.to(dtype).to(device) for t in (x, bias, residual, ln_weight, ln_bias))
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return args, kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 10 * n, "bytes": (3 * n + 3 * case["shape"][-1]) * size}
