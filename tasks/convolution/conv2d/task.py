"""2-D convolution (cross-correlation) with bias, stride and zero padding.

Implement `conv2d(x, weight, bias, stride=1, padding=0)` for float32 `x` [N, C, H, W],
`weight` [O, C, KH, KW] and `bias` [O], returning a new float32 tensor [N, O, OH, OW] with

    OH = (H + 2 * padding - KH) // stride + 1,   OW = (W + 2 * padding - KW) // stride + 1
    out[n, o, i, j] = bias[o] + sum over c, kh, kw of
                      weight[o, c, kh, kw] * x[n, c, i * stride - padding + kh, j * stride - padding + kw]

where `x` reads as 0 outside [0, H) x [0, W) (zero padding). This is
`torch.nn.functional.conv2d(x, weight, bias, stride=stride, padding=padding)` (no dilation, one
group). `stride` and `padding` are the same for both axes.

- `x` may be non-contiguous (in particular channels-last memory: a permuted NHWC tensor).
  Kernel sizes, channel counts and spatial sizes are arbitrary (1x1, 3x3, 5x5, 7x7 occur).
- Inputs must not be modified.

Accuracy: tensor-core TF32 products are acceptable (PyTorch itself uses TF32 for float32
convolutions on NVIDIA GPUs by default, so the reference carries that error too). Inputs are
scaled so outputs have unit scale, and the comparison uses rtol = atol = 1e-2: two TF32
computations differ by up to ~4e-3 over 1e8 outputs, and rounding variants of TF32 need room.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Convolution"
LEVEL = 4
TOLERANCE = {"float32": (1e-2, 1e-2)}


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int = 1, padding: int = 0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.conv2d(x, weight, bias, stride=stride, padding=padding)


CASES = [
    {"name": "3x3_pad1_small", "small": True, "x": [2, 3, 11, 13], "w": [8, 3, 3, 3], "stride": 1, "padding": 1},
    {"name": "5x5_stride2_small", "small": True, "x": [1, 8, 20, 21], "w": [16, 8, 5, 5], "stride": 2, "padding": 0},
    {"name": "1x1_small", "small": True, "x": [2, 16, 9, 9], "w": [24, 16, 1, 1], "stride": 1, "padding": 0},
    {"name": "one_pixel_small", "small": True, "x": [1, 5, 3, 3], "w": [7, 5, 3, 3], "stride": 1, "padding": 0},
    {"name": "channels_last_pad2_small", "small": True, "x": [2, 6, 12, 10], "w": [10, 6, 3, 3], "stride": 1,
     "padding": 2, "channels_last": True},
    {"name": "outliers_small", "small": True, "x": [1, 4, 16, 16], "w": [8, 4, 3, 3], "stride": 1, "padding": 1,
     "outliers": True},
    {"name": "resnet_3x3_32x64x56x56", "small": False, "x": [32, 64, 56, 56], "w": [128, 64, 3, 3], "stride": 1,
     "padding": 1},
    {"name": "stem_7x7_s2_32x3x224x224", "small": False, "x": [32, 3, 224, 224], "w": [64, 3, 7, 7], "stride": 2,
     "padding": 3},
    {"name": "1x1_32x256x28x28", "small": False, "x": [32, 256, 28, 28], "w": [512, 256, 1, 1], "stride": 1,
     "padding": 0},
    {"name": "outliers_3x3_16x256x28x28", "small": False, "x": [16, 256, 28, 28], "w": [256, 256, 3, 3],
     "stride": 1, "padding": 1, "outliers": True},
    {"name": "channels_last_3x3_s2_32x128x57x57", "small": False, "x": [32, 128, 57, 57], "w": [192, 128, 3, 3],
     "stride": 2, "padding": 1, "channels_last": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x ~ normal (outliers: 0.1% scaled by 10); weight ~ normal / sqrt(C * KH * KW), so each
    output has unit variance; bias ~ 0.5 * normal. A channels_last case draws an NHWC tensor and
    returns its NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["x"]
    o, _, kh, kw = case["w"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    weight = torch.randn(case["w"], generator=g, device=g.device) / (c * kh * kw) ** 0.5
    bias = 0.5 * torch.randn(o, generator=g, device=g.device)
    x, weight, bias = x.to(device), weight.to(device), bias.to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, weight, bias), {"stride": case["stride"], "padding": case["padding"]}


def cost(case: dict) -> dict:
    n, c, h, w = case["x"]
    o, _, kh, kw = case["w"]
    s, p = case["stride"], case["padding"]
    oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    return {"flops": 2 * n * o * oh * ow * c * kh * kw,
            "bytes": 4 * (n * c * h * w + o * c * kh * kw + o + n * o * oh * ow)}
