"""Instance normalization (per sample and channel, over the spatial positions).

Implement `instance_norm(x, weight, bias, eps=1e-5)` for float32 `x` of shape [N, C, H, W] and
float32 `weight` and `bias` of shape [C], returning a new float32 tensor of the shape of `x`. For
every sample n and channel c, the statistics run over the H * W positions of that image plane:

    mean = sum over h, w of x[n, c, h, w] / (H * W)
    var  = sum over h, w of (x[n, c, h, w] - mean) ** 2 / (H * W)          # biased
    y[n, c, h, w] = (x[n, c, h, w] - mean) / sqrt(var + eps) * weight[c] + bias[c]

This is `torch.nn.functional.instance_norm(x, weight=weight, bias=bias, eps=eps)` (statistics from
the input, no running statistics).

- N, C, H, W are arbitrary: planes range from a few positions to hundreds of thousands, so a plane
  may not fit in one program's registers, and there may be very many small planes. `x` may be
  non-contiguous (in particular channels-last memory: a permuted NHWC tensor). Inputs must not be
  modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions in the
statistics is free).
"""
import torch

CATEGORY = "Normalization"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-4)}


def instance_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.instance_norm(x, weight=weight, bias=bias, eps=eps)


CASES = [
    {"name": "small", "small": True, "shape": [2, 3, 9, 11]},
    {"name": "tiny_planes_small", "small": True, "shape": [4, 16, 2, 3]},
    {"name": "one_plane_large_small", "small": True, "shape": [1, 1, 70, 80], "eps": 1e-3},
    {"name": "channels_last_small", "small": True, "shape": [2, 8, 6, 5], "channels_last": True},
    {"name": "outliers_small", "small": True, "shape": [1, 4, 20, 20], "outliers": True},
    {"name": "style_8x64x256x256", "small": False, "shape": [8, 64, 256, 256]},
    {"name": "many_planes_256x512x7x7", "small": False, "shape": [256, 512, 7, 7]},
    {"name": "channels_last_16x128x64x64_outliers", "small": False, "shape": [16, 128, 64, 64],
     "channels_last": True, "outliers": True},
    {"name": "one_plane_1x1x4096x4096", "small": False, "shape": [1, 1, 4096, 4096]},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-(sample, channel) offsets (0..2) and scales (0.5..2) (outliers: 0.1%
    scaled by 10); weight 1 + 0.3 * normal; bias 0.3 * normal. A channels_last case draws NHWC and
    returns the NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["shape"]
    cl = case.get("channels_last", False)
    x = torch.randn([n, h, w, c] if cl else [n, c, h, w], generator=g, device=g.device)
    if case.get("outliers"):
        x = torch.where(torch.rand(x.shape, generator=g, device=g.device) < 0.001, x * 10, x)
    if cl:
        x = x.permute(0, 3, 1, 2)
    x = x * (0.5 + 1.5 * torch.rand(n, c, 1, 1, generator=g, device=g.device)) + 2 * torch.rand(n, c, 1, 1, generator=g, device=g.device)
    if cl:
        x = x.permute(0, 2, 3, 1).contiguous()
    weight = 1 + 0.3 * torch.randn(c, generator=g, device=g.device)
    bias = 0.3 * torch.randn(c, generator=g, device=g.device)
    x, weight, bias = x.to(device), weight.to(device), bias.to(device)
    if cl:
        x = x.permute(0, 3, 1, 2)
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, weight, bias), kwargs


def cost(case: dict) -> dict:
    n, c, h, w = case["shape"]
    return {"flops": 8 * n * c * h * w, "bytes": 4 * (2 * n * c * h * w + 2 * c)}
