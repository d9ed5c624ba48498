"""GroupNorm followed by SiLU (the normalization + activation of every diffusion-UNet ResNet
block).

Implement `group_norm_silu(x, num_groups, weight, bias, eps=1e-5)` for `x` `[N, C, H, W]` (NCHW)
with C divisible by `num_groups` and per-channel `weight`, `bias` `[C]`. For every sample n and
group g (channels g*C/G .. (g+1)*C/G - 1, all H*W positions), in float32:

    mean = mean of x over the group,  var = mean of (x - mean) ** 2 over the group   # biased
    y[n, c, h, w] = (x[n, c, h, w] - mean) / sqrt(var + eps) * weight[c] + bias[c]
    out = y / (1 + exp(-y))                                          # SiLU, rounded to x.dtype

- `x`, `weight`, `bias` share a dtype (float32, float16 or bfloat16); `x` is contiguous, on the
  GPU. A group may hold hundreds of thousands of elements (e.g. 10 channels of 64 x 64), and
  N * num_groups may be small, so one program per group underuses the GPU: split the statistics.
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 4


def group_norm_silu(x: torch.Tensor, num_groups: int, weight: torch.Tensor, bias: torch.Tensor,
                    eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = torch.nn.functional.group_norm(x.float(), num_groups, weight.float(), bias.float(), eps)
    return torch.nn.functional.silu(y).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [2, 8, 5, 7], "groups": 2, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [1, 4, 12, 12], "groups": 2, "dtype": "float16"},
    {"name": "bf16_hw1_outliers_small", "small": True, "shape": [2, 6, 1, 1], "groups": 2, "dtype": "bfloat16",
     "outliers": True},
    {"name": "splits_small", "small": True, "shape": [1, 4, 19, 37], "groups": 2, "dtype": "float32"},
    {"name": "long_chunks_small", "small": True, "shape": [1, 2, 256, 260], "groups": 1, "dtype": "float32"},
    {"name": "fp16_sd_2x320x64x64_g32", "small": False, "shape": [2, 320, 64, 64], "groups": 32,
     "dtype": "float16"},
    {"name": "fp32_8x640x32x32_g32", "small": False, "shape": [8, 640, 32, 32], "groups": 32,
     "dtype": "float32"},
    {"name": "bf16_sdxl_2x640x128x128_g32_outliers", "small": False, "shape": [2, 640, 128, 128], "groups": 32,
     "dtype": "bfloat16", "outliers": True},
]


# Unseen cases (kbx_ray/unseen.py): C stays a multiple of the group count (the H100 drew 641 channels
# for 32 groups before this was declared, and the reference itself refused the case).
SHAPES = family(multiple={"shape.1": "groups"})

def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-channel offsets in [-1, 1) and scales in [0.5, 2) (outliers: 0.1% scaled
    by 10); weight: 1 + 0.2 * normal; bias: 0.2 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["shape"]
    x = normal(g, [n, c, h, w], case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(1, c, 1, 1, generator=g, device=g.device)) + (2 * torch.rand(1, c, 1, 1, generator=g, device=g.device) - 1)
    weight = 1 + 0.2 * torch.randn(c, generator=g, device=g.device)
    bias = 0.2 * torch.randn(c, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, weight, bias = (t.to(dtype).to(device) for t in (x, weight, bias))
    return (x, case["groups"], weight, bias), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 12 * n, "bytes": 2 * n * size + 2 * case["shape"][1] * size}
