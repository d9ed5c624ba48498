"""W8A8 2-D convolution: int8 activations and weights, per-tensor activation scale, per-output-
channel weight scales, float32 bias.

Implement `conv2d_w8a8(x, weight, x_scale, w_scale, bias, stride=1, padding=0)` for int8 `x`
[N, C, H, W], int8 `weight` [O, C, KH, KW], a Python float `x_scale` (one scale for the whole
activation tensor; exactly representable in float32), float32 `w_scale` [O] and float32 `bias`
[O], returning a new float32 tensor `out` [N, O, OH, OW]:

    OH = (H + 2 * padding - KH) // stride + 1,   OW = (W + 2 * padding - KW) // stride + 1
    acc[n, o, i, j] = sum over c, kh, kw of int32(weight[o, c, kh, kw]) *
                      int32(x[n, c, i * stride - padding + kh, j * stride - padding + kw])
    out[n, o, i, j] = (float32(acc[n, o, i, j]) * x_scale) * w_scale[o] + bias[o]

- Integer semantics: int8 values are signed (the inputs use -127..127). Positions outside the
  image read as the integer 0 (zero padding; the quantization is symmetric, so 0 means 0.0).
  The accumulation is exact in int32 (|acc| < 2**24 for every case, so float32(acc) is exact).
- Apply the scales and the bias in float32 (this order; a fused multiply-add or folding
  x_scale * w_scale[o] first is also fine). No dilation, one group; `stride` and `padding` apply
  to both axes.
- `x` may be non-contiguous (in particular channels-last memory: a permuted NHWC tensor). Kernel
  sizes, channel counts and spatial sizes are arbitrary (1x1, 3x3 and 7x7 occur). Inputs must
  not be modified.

Checked against the reference below (acc computed exactly in float64) by `check`: every element
must be within 1e-5 relative + 1e-5 absolute of the reference (outputs are of order 1), with
cosine similarity >= 0.99999 and relative L1 error <= 1e-5.
"""
import torch

from kbx_ray.taskkit import int8

CATEGORY = "Quantization"
LEVEL = 4


def conv2d_w8a8(x: torch.Tensor, weight: torch.Tensor, x_scale: float, w_scale: torch.Tensor, bias: torch.Tensor,
                stride: int = 1, padding: int = 0) -> torch.Tensor:
    """PyTorch reference. A float64 convolution of int8 values is exact here (|acc| < 2**53)."""
    acc = torch.nn.functional.conv2d(x.double(), weight.double(), stride=stride, padding=padding)
    return (acc.float() * x_scale) * w_scale[None, :, None, None] + bias[None, :, None, None]


CASES = [
    {"name": "3x3_pad1_small", "small": True, "x": [1, 4, 8, 9], "w": [8, 4, 3, 3], "stride": 1, "padding": 1},
    {"name": "3x3_stride2_small", "small": True, "x": [1, 3, 11, 12], "w": [6, 3, 3, 3], "stride": 2,
     "padding": 0},
    {"name": "1x1_small", "small": True, "x": [2, 16, 5, 5], "w": [20, 16, 1, 1], "stride": 1, "padding": 0},
    {"name": "channels_last_pad2_small", "small": True, "x": [1, 5, 7, 6], "w": [7, 5, 3, 3], "stride": 1,
     "padding": 2, "channels_last": True},
    {"name": "outliers_small", "small": True, "x": [1, 8, 8, 8], "w": [16, 8, 3, 3], "stride": 1, "padding": 1,
     "outliers": True},
    {"name": "tiles_small", "small": True, "x": [2, 40, 10, 9], "w": [136, 40, 3, 3], "stride": 1, "padding": 1},
    {"name": "resnet_3x3_32x64x56x56", "small": False, "x": [32, 64, 56, 56], "w": [128, 64, 3, 3], "stride": 1,
     "padding": 1},
    {"name": "stem_7x7_s2_32x3x224x224", "small": False, "x": [32, 3, 224, 224], "w": [64, 3, 7, 7], "stride": 2,
     "padding": 3},
    {"name": "1x1_32x256x28x28_outliers", "small": False, "x": [32, 256, 28, 28], "w": [512, 256, 1, 1],
     "stride": 1, "padding": 0, "outliers": True},
    {"name": "channels_last_3x3_s2_32x128x57x57", "small": False, "x": [32, 128, 57, 57], "w": [192, 128, 3, 3],
     "stride": 2, "padding": 1, "channels_last": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x = round(20 * normal) and weight = round(30 * normal), clamped to [-127, 127] (outliers:
    0.1% of x scaled by 10 first). x_scale = 1/20; w_scale uniform in [0.5, 1.5] / (30 * sqrt(C *
    KH * KW)) (rounded to float32), so outputs are of order 1; bias = 0.5 * normal. A channels_last
    case draws an NHWC tensor and returns its NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["x"]
    o, _, kh, kw = case["w"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = int8(g, shape, 20.0, case.get("outliers", False))
    weight = int8(g, case["w"], 30.0, False)
    x_scale = float(torch.tensor(1 / 20, dtype=torch.float32, device=device))
    w_scale = (0.5 + torch.rand(o, generator=g, device=g.device)) / (30 * (c * kh * kw) ** 0.5)
    bias = 0.5 * torch.randn(o, generator=g, device=g.device)
    x, weight, w_scale, bias = (t.to(device) for t in (x, weight, w_scale, bias))
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, weight, x_scale, w_scale, bias), {"stride": case["stride"], "padding": case["padding"]}


def cost(case: dict) -> dict:
    n, c, h, w = case["x"]
    o, _, kh, kw = case["w"]
    s, p = case["stride"], case["padding"]
    oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    return {"flops": 2 * n * o * oh * ow * c * kh * kw,
            "bytes": n * c * h * w + o * c * kh * kw + 8 * o + 4 * n * o * oh * ow}


def check(out: list, ref: list, case: dict) -> str | None:
    """Strict comparison (see the module docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    o, r = o.double(), r.double()
    if not torch.isfinite(o).all():
        return "output has non-finite values"
    err = (o - r).abs()
    bad = err > 1e-5 * r.abs() + 1e-5
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        return (f"{int(bad.sum())} elements off, e.g. flat index {i}: "
                f"{o.flatten()[i].item():.8g} vs {r.flatten()[i].item():.8g}")
    cos = float((o * r).sum() / (o.norm() * r.norm()).clamp_min(1e-30))
    rel_l1 = float(err.sum() / r.abs().sum().clamp_min(1e-30))
    if cos < 0.99999 or rel_l1 > 1e-5:
        return f"cosine {cos:.7f} (need >= 0.99999), relative L1 {rel_l1:.2e} (need <= 1e-5)"
    return None
