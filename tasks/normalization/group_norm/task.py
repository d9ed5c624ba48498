"""Group normalization.

Implement `group_norm(x, num_groups, weight, bias, eps=1e-5)` for `x` of shape [N, C, H, W],
`weight` and `bias` of shape [C], returning a new tensor of the shape and dtype of `x`. The C
channels are split into `num_groups` consecutive groups of C / num_groups channels; for every
sample n and group g, the statistics run over all (channel, h, w) positions of that group:

    mean = sum of x[n, c, h, w] over c in group g, all h, w   /  (C / num_groups * H * W)
    var  = sum of (x[n, c, h, w] - mean) ** 2 over the same    /  (C / num_groups * H * W)   # biased
    y[n, c, h, w] = (x[n, c, h, w] - mean) / sqrt(var + eps) * weight[c] + bias[c]

This is `torch.nn.functional.group_norm(x, num_groups, weight, bias, eps)`.

- dtype is float32 or float16 (weight and bias have the dtype of x). Compute the statistics and
  the normalization in float32 and round once to the dtype of x.
- C is divisible by num_groups; num_groups may be 1 (one group of all channels) or C (one channel
  per group). Group sizes are arbitrary (from a few elements to hundreds of thousands), so a
  group may not fit in one program's registers. `x` may be non-contiguous (in particular
  channels-last memory: a permuted NHWC tensor). Inputs must not be modified.

Compared with the PyTorch call above: float32 with rtol = atol = 1e-4 (the order of the additions
in the statistics is free), float16 with the default 5e-3.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Normalization"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-4)}


def group_norm(x: torch.Tensor, num_groups: int, weight: torch.Tensor, bias: torch.Tensor,
               eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.group_norm(x, num_groups, weight, bias, eps)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [2, 6, 5, 7], "groups": 3, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [1, 8, 16, 16], "groups": 4, "dtype": "float16"},
    {"name": "one_group_small", "small": True, "shape": [2, 4, 8, 9], "groups": 1, "dtype": "float32"},
    {"name": "group_per_channel_eps_small", "small": True, "shape": [2, 6, 4, 4], "groups": 6,
     "dtype": "float32", "eps": 1e-3},
    {"name": "channels_last_outliers_small", "small": True, "shape": [1, 12, 6, 10], "groups": 4,
     "dtype": "float32", "channels_last": True, "outliers": True},
    {"name": "long_group_small", "small": True, "shape": [1, 4, 30, 40], "groups": 2, "dtype": "float32"},
    {"name": "fp32_32x512x64x64_g32", "small": False, "shape": [32, 512, 64, 64], "groups": 32, "dtype": "float32"},
    {"name": "fp16_sd_8x320x128x128_g32", "small": False, "shape": [8, 320, 128, 128], "groups": 32,
     "dtype": "float16", "outliers": True},
    {"name": "fp16_channels_last_16x256x56x56_g8", "small": False, "shape": [16, 256, 56, 56], "groups": 8,
     "dtype": "float16", "channels_last": True},
    {"name": "fp32_many_small_groups_256x192x14x14_g96", "small": False, "shape": [256, 192, 14, 14],
     "groups": 96, "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): C stays a multiple of num_groups.
SHAPES = family(multiple={"shape.1": "groups"})


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
    dtype = getattr(torch, case["dtype"])
    x, weight, bias = (t.to(dtype).to(device) for t in (x, weight, bias))
    if cl:
        x = x.permute(0, 3, 1, 2)
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, case["groups"], weight, bias), kwargs


def cost(case: dict) -> dict:
    n, c, h, w = case["shape"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 8 * n * c * h * w, "bytes": (2 * n * c * h * w + 2 * c) * size}
