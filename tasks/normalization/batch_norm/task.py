"""Batch normalization in inference mode (running statistics).

Implement `batch_norm(x, running_mean, running_var, weight, bias, eps=1e-5)` for float32 `x` of
shape [N, C] or [N, C, H, W] and float32 per-channel tensors `running_mean`, `running_var`,
`weight`, `bias` of shape [C], returning a new float32 tensor `y` of the shape of `x` with

    y[n, c, ...] = (x[n, c, ...] - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c]

This is `torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias,
training=False, eps=eps)`: the statistics come from the arguments, nothing is computed over the
batch, and the running statistics are not updated.

- N, C, H, W are arbitrary. `x` may be non-contiguous (in particular channels-last memory: a
  permuted NHWC tensor); the output may be contiguous. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-5 (folding the per-channel constants
into one scale and shift changes results by a few ulps only).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Normalization"
LEVEL = 2


def batch_norm(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, weight: torch.Tensor,
               bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference (inference mode)."""
    return torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=eps)


CASES = [
    {"name": "small", "small": True, "shape": [4, 6, 9, 11]},
    {"name": "2d_small", "small": True, "shape": [300, 37]},
    {"name": "one_sample_small", "small": True, "shape": [1, 16, 7, 7], "eps": 1e-3},
    {"name": "channels_last_small", "small": True, "shape": [2, 20, 8, 10], "channels_last": True},
    {"name": "outliers_small", "small": True, "shape": [3, 8, 16, 16], "outliers": True},
    {"name": "resnet_64x256x56x56", "small": False, "shape": [64, 256, 56, 56]},
    {"name": "channels_last_64x128x57x57", "small": False, "shape": [64, 128, 57, 57], "channels_last": True},
    {"name": "2d_1048576x64_outliers", "small": False, "shape": [1048576, 64], "outliers": True},
    {"name": "wide_32x2048x15x15", "small": False, "shape": [32, 2048, 15, 15]},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal plus a per-channel offset of 2 * normal (outliers: 0.1% scaled by 10);
    running_mean near that offset, running_var uniform in [0.25, 4], weight 1 + 0.3 * normal, bias
    0.3 * normal. A channels_last case draws NHWC and returns the NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    c = shape[1]
    cl = case.get("channels_last", False)
    draw = [shape[0], shape[2], shape[3], c] if cl else shape
    x = normal(g, draw, case.get("outliers"))
    offset = 2 * torch.randn(c, generator=g, device=g.device)
    x = x + (offset if cl else offset.reshape([c] + [1] * (len(shape) - 2)))
    mean = offset + 0.1 * torch.randn(c, generator=g, device=g.device)
    var = 0.25 + 3.75 * torch.rand(c, generator=g, device=g.device)
    weight = 1 + 0.3 * torch.randn(c, generator=g, device=g.device)
    bias = 0.3 * torch.randn(c, generator=g, device=g.device)
    x, mean, var, weight, bias = (t.to(device) for t in (x, mean, var, weight, bias))
    if cl:
        x = x.permute(0, 3, 1, 2)
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, mean, var, weight, bias), kwargs


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 4 * n, "bytes": 4 * (2 * n + 4 * case["shape"][1])}
