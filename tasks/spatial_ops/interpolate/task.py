"""Bilinear resize (align_corners=False).

Implement `interpolate(x, out_h, out_w)`: resize every [H, W] image of `x` ([N, C, H, W]) to
[out_h, out_w] with bilinear interpolation, returning a new tensor [N, C, out_h, out_w] of the
dtype of `x`. This is `torch.nn.functional.interpolate(x, size=(out_h, out_w), mode="bilinear",
align_corners=False)`. Along each axis (shown for rows, with input size H), in float32:

    scale = H / out_h                                    # float32
    src   = max(scale * (oh + 0.5) - 0.5, 0)             # source coordinate of output row oh
    h0    = floor(src);  h1 = min(h0 + 1, H - 1);  lh = src - h0

and likewise w0, w1, lw for columns. Then

    out = (1 - lh) * ((1 - lw) * x[h0, w0] + lw * x[h0, w1]) + lh * ((1 - lw) * x[h1, w0] + lw * x[h1, w1])

computed in float32 and rounded to the dtype of `x`.

- `x` is float32, float16 or bfloat16 on the GPU; it may be non-contiguous (for example
  channels-last memory, i.e. a permuted NHWC tensor). out_h, out_w >= 1; both upsampling and
  downsampling occur. Inputs must not be modified.

Compared with the PyTorch call above using the default tolerance for float16/bfloat16 and
rtol = atol = 1e-4 for float32: source coordinates near 256 carry float32 rounding of ~1e-5,
so an equally valid evaluation order (e.g. fused multiply-adds) can differ by more than 1e-5.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "SpatialOps"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def interpolate(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.interpolate(x, size=(out_h, out_w), mode="bilinear", align_corners=False)


CASES = [
    {"name": "up_small", "small": True, "shape": [2, 3, 17, 23], "out": [40, 50], "dtype": "float32"},
    {"name": "down_small", "small": True, "shape": [1, 4, 64, 48], "out": [31, 20], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [2, 2, 30, 30], "out": [45, 17], "dtype": "float16"},
    {"name": "bf16_small", "small": True, "shape": [1, 3, 20, 33], "out": [20, 66], "dtype": "bfloat16"},
    {"name": "to_1x1_small", "small": True, "shape": [1, 2, 9, 7], "out": [1, 1], "dtype": "float32"},
    {"name": "channels_last_small", "small": True, "shape": [2, 5, 16, 12], "out": [24, 30], "dtype": "float32",
     "channels_last": True},
    {"name": "fp16_outliers_small", "small": True, "shape": [1, 3, 40, 40], "out": [50, 60], "dtype": "float16",
     "outliers": True},
    {"name": "fp32_up2x_16x64x128x128", "small": False, "shape": [16, 64, 128, 128], "out": [256, 256],
     "dtype": "float32"},
    {"name": "fp32_odd_4x96x250x250", "small": False, "shape": [4, 96, 250, 250], "out": [377, 411],
     "dtype": "float32"},
    {"name": "fp16_down_16x32x512x512_outliers", "small": False, "shape": [16, 32, 512, 512], "out": [300, 300],
     "dtype": "float16", "outliers": True},
    {"name": "bf16_channels_last_8x64x100x150", "small": False, "shape": [8, 64, 100, 150], "out": [333, 500],
     "dtype": "bfloat16", "channels_last": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal pixels (outliers: 0.1% scaled by 10). A channels_last case draws an NHWC
    tensor and returns its NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["shape"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    out_h, out_w = case["out"]
    return (x, out_h, out_w), {}


def cost(case: dict) -> dict:
    n, c, h, w = case["shape"]
    out_h, out_w = case["out"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    n_out = n * c * out_h * out_w
    # `min_bytes`: a downscale reads only the rows and columns its taps touch (at least one per
    # output row or column)
    return {"flops": 9 * n_out, "bytes": (n * c * h * w + n_out) * size,
            "min_bytes": (n * c * min(h, out_h) * min(w, out_w) + n_out) * size}
