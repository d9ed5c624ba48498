"""Inference-mode BatchNorm followed by ReLU (the BN + ReLU pair of a CNN at inference time), for
NCHW or channels-last feature maps.

Implement `batch_norm_relu(x, running_mean, running_var, weight, bias, eps=1e-5)` for `x` of shape
`[N, C, H, W]` and per-channel float32 statistics and affine parameters of shape `[C]`:

    y   = (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c]
    out = max(y, 0)                                    # float32 math, rounded once to x.dtype

- `x` has dtype float32, float16 or bfloat16, on the GPU, and is either contiguous (NCHW) or
  contiguous in the channels-last memory format (NHWC in memory, `x.stride(1) == 1`). Handle both
  without materializing a transposed copy; the output has the shape of `x` (any memory layout).
- H * W may be 1. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def batch_norm_relu(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                    weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = torch.nn.functional.batch_norm(x.float(), running_mean, running_var, weight, bias,
                                       training=False, eps=eps)
    return torch.relu(y).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [2, 6, 11, 13], "dtype": "float32"},
    {"name": "fp16_channels_last_small", "small": True, "shape": [2, 24, 7, 9], "dtype": "float16",
     "channels_last": True},
    {"name": "bf16_outliers_small", "small": True, "shape": [1, 10, 20, 20], "dtype": "bfloat16",
     "outliers": True},
    {"name": "hw1_channels_last_small", "small": True, "shape": [8, 100, 1, 1], "dtype": "float32",
     "channels_last": True},
    {"name": "programs_small", "small": True, "shape": [2, 6, 30, 31], "dtype": "float32"},
    {"name": "fp32_32x256x56x56", "small": False, "shape": [32, 256, 56, 56], "dtype": "float32"},
    {"name": "fp16_channels_last_64x128x112x112", "small": False, "shape": [64, 128, 112, 112],
     "dtype": "float16", "channels_last": True},
    {"name": "bf16_128x512x28x28_outliers", "small": False, "shape": [128, 512, 28, 28], "dtype": "bfloat16",
     "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); running_mean: 0.5 * normal; running_var:
    uniform in [0.25, 2.25); weight: 1 + 0.3 * normal; bias: 0.3 * normal (so about half the
    outputs are positive). With `channels_last`, x is converted to that memory format."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    c = shape[1]
    x = normal(g, shape, case.get("outliers"))
    mean = 0.5 * torch.randn(c, generator=g, device=g.device)
    var = 0.25 + 2 * torch.rand(c, generator=g, device=g.device)
    weight = 1 + 0.3 * torch.randn(c, generator=g, device=g.device)
    bias = 0.3 * torch.randn(c, generator=g, device=g.device)
    x = x.to(getattr(torch, case["dtype"]))
    if case.get("channels_last"):
        x = x.contiguous(memory_format=torch.channels_last)
    return (x.to(device), mean.to(device), var.to(device), weight.to(device), bias.to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 3 * n, "bytes": 2 * n * size + 16 * case["shape"][1]}
