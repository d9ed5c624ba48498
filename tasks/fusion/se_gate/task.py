"""Squeeze-and-excitation gating: scale every channel of a feature map by the sigmoid of a
per-(sample, channel) gate logit.

Implement `se_gate(x, gate)` for `x` of shape `[B, C, H, W]` (NCHW) and `gate` of shape `[B, C]`,
returning a new tensor of the shape and dtype of `x`:

    out[b, c, h, w] = x[b, c, h, w] * sigmoid(gate[b, c])      # float32 math, one rounding

- `x` and `gate` share a dtype (float32, float16 or bfloat16) and are on the GPU. `x` is
  contiguous NCHW; `gate` may be non-contiguous (for example a transposed `[C, B]` tensor viewed as
  `[B, C]`). H * W and C are arbitrary (H = W = 1 is possible).
- Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def se_gate(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    return (x.float() * torch.sigmoid(gate.float())[:, :, None, None]).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [2, 5, 13, 11], "dtype": "float32"},
    {"name": "fp16_gate_t_small", "small": True, "shape": [3, 24, 7, 7], "dtype": "float16", "gate_t": True},
    {"name": "bf16_outliers_small", "small": True, "shape": [1, 16, 14, 14], "dtype": "bfloat16",
     "outliers": True},
    {"name": "hw1_small", "small": True, "shape": [4, 96, 1, 1], "dtype": "float32"},
    {"name": "fp32_64x256x56x56", "small": False, "shape": [64, 256, 56, 56], "dtype": "float32"},
    {"name": "fp16_128x480x28x28_outliers", "small": False, "shape": [128, 480, 28, 28], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_256x1152x7x7_gate_t", "small": False, "shape": [256, 1152, 7, 7], "dtype": "bfloat16",
     "gate_t": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); gate: 2 * standard normal. With `gate_t`,
    gate is the `.t()` view of a contiguous [C, B] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, c, h, w = case["shape"]
    x = normal(g, [b, c, h, w], case.get("outliers"))
    gate = 2 * torch.randn(c, b, generator=g, device=g.device) if case.get("gate_t") else 2 * torch.randn(b, c, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, gate = x.to(dtype).to(device), gate.to(dtype).to(device)
    if case.get("gate_t"):
        gate = gate.t()
    return (x, gate), {}


def cost(case: dict) -> dict:
    b, c, h, w = case["shape"]
    n = b * c * h * w
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n + 4 * b * c, "bytes": (2 * n + b * c) * size}
