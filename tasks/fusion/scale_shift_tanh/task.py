"""Per-channel affine transform followed by tanh (a folded normalization + tanh output head, as in
image-generator output layers).

Implement `scale_shift_tanh(x, scale, shift)` for `x` of shape `[B, C, H, W]` (NCHW) and per-channel
`scale`, `shift` of shape `[C]`, returning a new tensor of the shape and dtype of `x`:

    out[b, c, h, w] = tanh(x[b, c, h, w] * scale[c] + shift[c])     # float32 math, one rounding

- `x` has dtype float32, float16 or bfloat16 and is contiguous, on the GPU; `scale` and `shift`
  are float32. H * W and C are arbitrary (H = W = 1 is possible).
- Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def scale_shift_tanh(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = x.float() * scale[None, :, None, None] + shift[None, :, None, None]
    return torch.tanh(y).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [2, 3, 17, 19], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [1, 4, 16, 20], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [3, 5, 9, 31], "dtype": "bfloat16", "outliers": True},
    {"name": "hw1_small", "small": True, "shape": [7, 64, 1, 1], "dtype": "float32"},
    {"name": "fp32_16x64x128x128", "small": False, "shape": [16, 64, 128, 128], "dtype": "float32"},
    {"name": "fp16_8x3x1024x1024_outliers", "small": False, "shape": [8, 3, 1024, 1024], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_32x320x45x45", "small": False, "shape": [32, 320, 45, 45], "dtype": "bfloat16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); scale: uniform in [0.2, 2], random sign;
    shift: 0.5 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    c = shape[1]
    x = normal(g, shape, case.get("outliers"))
    sign = torch.where(torch.rand(c, generator=g, device=g.device) < 0.5, -1.0, 1.0)
    scale = (0.2 + 1.8 * torch.rand(c, generator=g, device=g.device)) * sign
    shift = 0.5 * torch.randn(c, generator=g, device=g.device)
    x = x.to(getattr(torch, case["dtype"]))
    return (x.to(device), scale.to(device), shift.to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 6 * n, "bytes": 2 * n * size + 8 * case["shape"][1]}
