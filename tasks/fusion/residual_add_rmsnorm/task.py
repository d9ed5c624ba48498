"""Fused residual add + RMSNorm with two outputs (the pre-norm transformer step, as in vLLM's
`fused_add_rms_norm`, but out of place).

Implement `residual_add_rmsnorm(x, residual, weight, eps=1e-6)` returning a tuple `(out, h)`:

    h   = x + residual                                  # in float32, rounded to x.dtype: output 2
    ms  = mean(h ** 2) over the last dimension          # from the rounded h, in float32
    out = h / sqrt(ms + eps) * weight                   # float32, rounded once to x.dtype: output 1

- `x` and `residual` have shape `[..., D]` and the same dtype (float32, float16 or bfloat16), on
  the GPU; `weight` has shape `[D]` and the same dtype. The last dimension of `x` is contiguous but
  its rows need not be adjacent (for example a column slice of a wider tensor); `residual` is
  contiguous. D is arbitrary (not necessarily a power of two; it may be large).
- `h` is the new residual stream: it must be exactly `x + residual` rounded to the dtype, and the
  normalization must use that rounded value.
- Return two new tensors with the shape and dtype of `x`. Inputs must not be modified.

Both outputs are compared with the reference below using the default tolerance for the dtype.
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3


def residual_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                         eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference: float32 statistics, h rounded to the dtype before normalizing."""
    h = (x.float() + residual.float()).to(x.dtype)
    hf = h.float()
    out = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return out.to(x.dtype), h


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "bf16_3d_small", "small": True, "shape": [2, 5, 256], "dtype": "bfloat16"},
    {"name": "fp16_outliers_small", "small": True, "shape": [6, 1000], "dtype": "float16", "outliers": True},
    {"name": "one_row_small", "small": True, "shape": [1, 4097], "dtype": "float32"},
    {"name": "sliced_small", "small": True, "shape": [10, 320], "dtype": "float32", "sliced": True},
    {"name": "long_rows_small", "small": True, "shape": [2, 9000], "dtype": "float32", "eps": 1e-5},
    {"name": "bf16_4x2048x4096", "small": False, "shape": [4, 2048, 4096], "dtype": "bfloat16"},
    {"name": "fp16_16384x8192_outliers", "small": False, "shape": [16384, 8192], "dtype": "float16",
     "outliers": True},
    {"name": "fp32_sliced_8192x5120", "small": False, "shape": [8192, 5120], "dtype": "float32", "sliced": True},
    {"name": "bf16_2048x16384", "small": False, "shape": [2048, 16384], "dtype": "bfloat16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row scales in [0.5, 2] (outliers: 0.1% scaled by 10); residual: standard
    normal; weight: 1 + 0.2 * normal. A sliced x is the first D columns of a tensor 11 wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 11] if case.get("sliced") else shape
    x = torch.randn(full, generator=g, device=g.device) * (0.5 + 1.5 * torch.rand(full[:-1] + [1], generator=g, device=g.device))
    if case.get("outliers"):
        x = torch.where(torch.rand(full, generator=g, device=g.device) < 0.001, x * 10, x)
    residual = torch.randn(shape, generator=g, device=g.device)
    weight = 1 + 0.2 * torch.randn(d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, residual, weight = (t.to(dtype).to(device) for t in (x, residual, weight))
    if case.get("sliced"):
        x = x[..., :d]
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, residual, weight), kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 6 * n, "bytes": (4 * n + case["shape"][-1]) * size}
