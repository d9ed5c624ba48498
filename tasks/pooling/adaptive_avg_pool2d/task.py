"""2-D adaptive average pooling.

Implement `adaptive_avg_pool2d(x, output_size)` for `x` of shape [N, C, H, W] and
`output_size = (OH, OW)`, returning a new tensor [N, C, OH, OW] of the dtype of `x` whose cell
(i, j) is the mean of the input window

    rows    h0 = floor(i * H / OH)  <=  h  <  h1 = ceil((i + 1) * H / OH)
    columns w0 = floor(j * W / OW)  <=  w  <  w1 = ceil((j + 1) * W / OW)

    out[n, c, i, j] = sum(x[n, c, h0:h1, w0:w1]) / ((h1 - h0) * (w1 - w0))

i.e. `torch.nn.functional.adaptive_avg_pool2d(x, output_size)`. Windows have varying sizes and may
overlap when H (W) is not a multiple of OH (OW); OH > H (upsampling, windows of one or two rows) is
allowed, and (1, 1) is global average pooling.

- `x` is float32, float16 or bfloat16 on the GPU and may be non-contiguous (for example the
  [N, C, H, W] permuted view of a channels-last [N, H, W, C] tensor). OH, OW >= 1.
- Sum in float32, divide once by the window size, round once to the dtype of `x`. The input must
  not be modified and the output must not share memory with it.

Compared with the PyTorch call above using the default tolerance for the dtype (float32
rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Pooling"
LEVEL = 3


def adaptive_avg_pool2d(x: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.adaptive_avg_pool2d(x, output_size)


CASES = [
    {"name": "uneven_overlap_small", "small": True, "shape": [2, 3, 10, 9], "output_size": [4, 5],
     "dtype": "float32"},
    {"name": "fp16_identity_small", "small": True, "shape": [1, 4, 7, 7], "output_size": [7, 7],
     "dtype": "float16"},
    {"name": "bf16_upsample_small", "small": True, "shape": [2, 5, 5, 6], "output_size": [8, 9],
     "dtype": "bfloat16"},
    {"name": "global_small", "small": True, "shape": [3, 8, 16, 16], "output_size": [1, 1], "dtype": "float32"},
    {"name": "channels_last_small", "small": True, "shape": [2, 16, 12, 10], "output_size": [5, 3],
     "dtype": "float32", "channels_last": True},
    {"name": "outliers_small", "small": True, "shape": [2, 3, 17, 19], "output_size": [5, 6], "dtype": "float32",
     "outliers": True},
    {"name": "row_strip_small", "small": True, "shape": [2, 3, 20, 17], "output_size": [1, 4],
     "dtype": "float16"},
    {"name": "big_window_small", "small": True, "shape": [1, 2, 40, 40], "output_size": [2, 2], "dtype": "float32"},
    {"name": "global_odd_count_small", "small": True, "shape": [1, 2, 47, 47], "output_size": [1, 1], "dtype": "float32"},
    {"name": "fp32_32x256x64x64_to_7x7", "small": False, "shape": [32, 256, 64, 64], "output_size": [7, 7],
     "dtype": "float32"},
    {"name": "fp16_64x512x28x28_global_outliers", "small": False, "shape": [64, 512, 28, 28],
     "output_size": [1, 1], "dtype": "float16", "outliers": True},
    {"name": "bf16_16x128x112x112_to_56x56", "small": False, "shape": [16, 128, 112, 112],
     "output_size": [56, 56], "dtype": "bfloat16"},
    {"name": "fp32_channels_last_32x512x28x28_to_6x6", "small": False, "shape": [32, 512, 28, 28],
     "output_size": [6, 6], "dtype": "float32", "channels_last": True},
    {"name": "fp16_8x64x37x53_upsample_64x96", "small": False, "shape": [8, 64, 37, 53], "output_size": [64, 96],
     "dtype": "float16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values plus 1 (outliers: 0.1% of the normals scaled by 10), so window means
    are far from zero. A channels-last case draws [N, H, W, C] and returns the [N, C, H, W] view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["shape"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    x = (x + 1).to(getattr(torch, case["dtype"])).to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, tuple(case["output_size"])), {}


def cost(case: dict) -> dict:
    n, c, h, w = case["shape"]
    oh, ow = case["output_size"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # window elements summed over all outputs (overlapping windows re-read inputs)
    win = sum((-(-(i + 1) * h // oh)) - (i * h // oh) for i in range(oh)) * \
        sum((-(-(j + 1) * w // ow)) - (j * w // ow) for j in range(ow))
    return {"flops": n * c * win, "bytes": (n * c * h * w + n * c * oh * ow) * size}
