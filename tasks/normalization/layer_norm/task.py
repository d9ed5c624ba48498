"""Layer normalization over the last dimension.

Implement `layer_norm(x, weight, bias, eps=1e-5)`. With `D = x.shape[-1]`, every row `r` of `x`
(one vector of length D) is normalized independently:

    mean = sum(r) / D
    var  = sum((r - mean) ** 2) / D          # biased variance, as in torch.nn.LayerNorm
    y    = (r - mean) / sqrt(var + eps) * weight + bias

- `x` has shape `[..., D]` and dtype float32, float16 or bfloat16, on the GPU. Its last dimension
  may be strided and its rows need not be adjacent (for example a column slice of a wider tensor).
- `weight` and `bias` have shape `[D]` and the dtype of `x`.
- Compute the statistics and the normalization in float32; return a new tensor with the shape and
  dtype of `x`. Inputs must not be modified.

The result is compared with `torch.nn.functional.layer_norm(x, (D,), weight, bias, eps)` using
the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Normalization"
LEVEL = 3


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [16, 1000], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [13, 768], "dtype": "float16"},
    {"name": "bf16_3d_small", "small": True, "shape": [2, 7, 1024], "dtype": "bfloat16"},
    {"name": "one_row_small", "small": True, "shape": [1, 4097], "dtype": "float32"},
    {"name": "long_rows_small", "small": True, "shape": [2, 12345], "dtype": "float32"},
    {"name": "sliced_small", "small": True, "shape": [17, 300], "dtype": "float32", "sliced": True},
    {"name": "outliers_eps_small", "small": True, "shape": [16, 2049], "dtype": "float32", "outliers": True,
     "eps": 1e-3},
    {"name": "fp32_8192x4096", "small": False, "shape": [8192, 4096], "dtype": "float32"},
    {"name": "fp16_16384x4096_outliers", "small": False, "shape": [16384, 4096], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_4x2048x5120", "small": False, "shape": [4, 2048, 5120], "dtype": "bfloat16"},
    {"name": "fp32_sliced_32768x1000", "small": False, "shape": [32768, 1000], "dtype": "float32",
     "sliced": True},
    {"name": "fp32_1024x20000", "small": False, "shape": [1024, 20000], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets (mean 0..2) and scales (std 0.5..2), outliers scaled by 10
    with probability 0.001; weight: 1 + 0.5 * normal; bias: normal. A sliced case returns the
    first D columns of a tensor 7 columns wider, so row strides are not D."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 7] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"))
    scale = 0.5 + 1.5 * torch.rand(full[:-1] + [1], generator=g, device=g.device)
    offset = 2 * torch.rand(full[:-1] + [1], generator=g, device=g.device)
    x = x * scale + offset
    weight = 1 + 0.5 * torch.randn(d, generator=g, device=g.device)
    bias = torch.randn(d, generator=g, device=g.device)
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
    d = case["shape"][-1]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 8 * n, "bytes": (2 * n + 2 * d) * size}
