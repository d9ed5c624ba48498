"""Depthwise 2-D convolution (one filter per channel) with bias, stride and zero padding.

Implement `depthwise_conv2d(x, weight, bias, stride=1, padding=0)` for float32 `x` [N, C, H, W],
`weight` [C, 1, KH, KW] and `bias` [C], returning a new float32 tensor [N, C, OH, OW] with

    OH = (H + 2 * padding - KH) // stride + 1,   OW = (W + 2 * padding - KW) // stride + 1
    out[n, c, i, j] = bias[c] + sum over kh, kw of
                      weight[c, 0, kh, kw] * x[n, c, i * stride - padding + kh, j * stride - padding + kw]

where `x` reads as 0 outside [0, H) x [0, W). This is `torch.nn.functional.conv2d(x, weight, bias,
stride=stride, padding=padding, groups=C)`: every channel is convolved with its own KH x KW
filter, and channels never mix (so there is no reduction over C, and the op is memory-bound).

- Compute in full float32 (no TF32). `stride` and `padding` apply to both axes; KH and KW are
  arbitrary (3x3, 5x5, 7x7, 5x3 and 1x1 occur). N, C, H, W are arbitrary.
- `x` may be non-contiguous (in particular channels-last memory: a permuted NHWC tensor). Inputs
  must not be modified.

The reference evaluates the convolution in float64 (so cuDNN's TF32 mode cannot affect it) and
rounds to float32; compared with rtol = atol = 1e-5 (any order of the KH * KW additions passes).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Convolution"
LEVEL = 3


def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int = 1,
                     padding: int = 0) -> torch.Tensor:
    """PyTorch reference (float64 convolution, float32 result)."""
    out = torch.nn.functional.conv2d(x.double(), weight.double(), bias.double(), stride=stride, padding=padding,
                                     groups=x.shape[1])
    return out.float()


CASES = [
    {"name": "3x3_pad1_small", "small": True, "x": [1, 3, 17, 19], "k": [3, 3], "stride": 1, "padding": 1},
    {"name": "3x3_stride2_pad2_small", "small": True, "x": [1, 2, 20, 21], "k": [3, 3], "stride": 2, "padding": 2},
    {"name": "5x3_no_pad_small", "small": True, "x": [1, 4, 12, 9], "k": [5, 3], "stride": 1, "padding": 0},
    {"name": "1x1_small", "small": True, "x": [2, 3, 10, 10], "k": [1, 1], "stride": 1, "padding": 0},
    {"name": "channels_last_outliers_small", "small": True, "x": [1, 6, 15, 14], "k": [3, 3], "stride": 2,
     "padding": 1, "channels_last": True, "outliers": True},
    {"name": "mobilenet_3x3_32x256x56x56", "small": False, "x": [32, 256, 56, 56], "k": [3, 3], "stride": 1,
     "padding": 1},
    {"name": "stride2_3x3_64x32x112x112", "small": False, "x": [64, 32, 112, 112], "k": [3, 3], "stride": 2,
     "padding": 1},
    {"name": "convnext_7x7_32x512x28x28_outliers", "small": False, "x": [32, 512, 28, 28], "k": [7, 7],
     "stride": 1, "padding": 3, "outliers": True},
    {"name": "channels_last_5x5_32x384x29x29", "small": False, "x": [32, 384, 29, 29], "k": [5, 5], "stride": 1,
     "padding": 2, "channels_last": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x ~ normal (outliers: 0.1% scaled by 10); weight ~ normal / sqrt(KH * KW); bias ~ 0.5 *
    normal. A channels_last case draws an NHWC tensor and returns its NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["x"]
    kh, kw = case["k"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    weight = torch.randn(c, 1, kh, kw, generator=g, device=g.device) / (kh * kw) ** 0.5
    bias = 0.5 * torch.randn(c, generator=g, device=g.device)
    x, weight, bias = x.to(device), weight.to(device), bias.to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, weight, bias), {"stride": case["stride"], "padding": case["padding"]}


def cost(case: dict) -> dict:
    n, c, h, w = case["x"]
    kh, kw = case["k"]
    s, p = case["stride"], case["padding"]
    oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    return {"flops": 2 * n * c * oh * ow * kh * kw, "bytes": 4 * (n * c * h * w + c * kh * kw + c + n * c * oh * ow)}
