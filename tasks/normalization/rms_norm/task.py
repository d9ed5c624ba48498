"""RMS normalization over the last dimension.

Implement `rms_norm(x, weight, eps=1e-6)`. With `D = x.shape[-1]`, every row `r` of `x` (one
vector of length D) is normalized independently:

    rms = sqrt(sum(r ** 2) / D + eps)
    y   = r / rms * weight

(no mean subtraction and no bias, unlike layer norm).

- `x` has shape `[..., D]` and dtype float32, float16 or bfloat16; its rows need not be adjacent
  (for example a column slice of a wider tensor). `weight` has shape `[D]` and the dtype of `x`.
- Compute the statistics and the normalization in float32 and round once to the dtype of `x`
  (this is what PyTorch does). Return a new tensor with the shape and dtype of `x`. Inputs must
  not be modified.

The result is compared with `torch.nn.functional.rms_norm(x, (D,), weight, eps)` using the
default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Normalization"
LEVEL = 3


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [8, 1000], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 5, 768], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [6, 1024], "dtype": "bfloat16"},
    {"name": "one_row_long_small", "small": True, "shape": [1, 10000], "dtype": "float32"},
    {"name": "d1_small", "small": True, "shape": [300, 1], "dtype": "float32"},
    {"name": "sliced_outliers_eps_small", "small": True, "shape": [17, 300], "dtype": "float16",
     "sliced": True, "outliers": True, "eps": 1e-3},
    {"name": "fp16_16384x4096", "small": False, "shape": [16384, 4096], "dtype": "float16"},
    {"name": "bf16_4x4096x8192_outliers", "small": False, "shape": [4, 4096, 8192], "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp32_sliced_65536x1000", "small": False, "shape": [65536, 1000], "dtype": "float32",
     "sliced": True},
    {"name": "fp32_2048x20000", "small": False, "shape": [2048, 20000], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row scales (0.2..3) (outliers: 0.1% scaled by 10); weight: 1 + 0.3 *
    normal. A sliced case returns the first D columns of a tensor 5 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 5] if case.get("sliced") else shape
    x = normal(g, full, case.get("outliers"))
    x = x * (0.2 + 2.8 * torch.rand(full[:-1] + [1], generator=g, device=g.device))
    weight = 1 + 0.3 * torch.randn(d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, weight = x.to(dtype).to(device), weight.to(dtype).to(device)
    if case.get("sliced"):
        x = x[..., :d]
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, weight), kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    d = case["shape"][-1]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 4 * n, "bytes": (2 * n + d) * size}
