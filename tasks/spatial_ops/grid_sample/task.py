"""Bilinear grid sampling with zero padding (grid_sample, align_corners=False).

Implement `grid_sample(x, grid)`: for float32 `x` [N, C, H, W] and a float32 sampling grid
`grid` [N, OH, OW, 2], return a new float32 tensor `out` [N, C, OH, OW]. grid[n, i, j] = (gx, gy)
is a normalized location: gx = -1 is the left edge of the leftmost pixel and +1 the right edge of
the rightmost (likewise gy for rows; note gx indexes W and gy indexes H). In float32:

    ix = ((gx + 1) * W - 1) / 2          # source column, in pixel units
    iy = ((gy + 1) * H - 1) / 2          # source row
    x0 = floor(ix),  y0 = floor(iy),  x1 = x0 + 1,  y1 = y0 + 1
    wx1 = ix - x0,  wx0 = 1 - wx1,  wy1 = iy - y0,  wy0 = 1 - wy1
    out[n, c, i, j] = wy0 * wx0 * X(y0, x0) + wy0 * wx1 * X(y0, x1)
                    + wy1 * wx0 * X(y1, x0) + wy1 * wx1 * X(y1, x1)

where X(r, s) = x[n, c, r, s] if 0 <= r < H and 0 <= s < W, and 0 otherwise (zero padding: a
corner outside the image contributes nothing). This is `torch.nn.functional.grid_sample(x, grid,
mode="bilinear", padding_mode="zeros", align_corners=False)`.

- Grid values fall both inside and outside [-1, 1] (some samples are entirely outside: 0).
  N, C, H, W, OH, OW are arbitrary. `x` may be non-contiguous (in particular channels-last memory:
  a permuted NHWC tensor); `grid` is contiguous. Inputs must not be modified.

The reference evaluates this in float64 and rounds to float32. Compared with rtol = atol = 1e-3:
a float32 source coordinate of a few hundred pixels carries a rounding error of about 2e-5
pixels, and the image changes by several units per pixel (tens near outliers), so any float32
evaluation order (PyTorch's own float32 kernel included) is off by up to about 4e-4.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "SpatialOps"
LEVEL = 4
TOLERANCE = {"float32": (1e-3, 1e-3)}


def grid_sample(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """PyTorch reference, evaluated in float64."""
    out = torch.nn.functional.grid_sample(x.double(), grid.double(), mode="bilinear", padding_mode="zeros",
                                          align_corners=False)
    return out.float()


CASES = [
    {"name": "small", "small": True, "x": [1, 3, 12, 15], "out": [10, 11]},
    {"name": "batched_small", "small": True, "x": [2, 2, 9, 7], "out": [6, 13]},
    {"name": "one_pixel_out_small", "small": True, "x": [2, 4, 5, 6], "out": [1, 1]},
    {"name": "one_pixel_in_small", "small": True, "x": [1, 3, 1, 1], "out": [8, 8]},
    {"name": "channels_last_outliers_small", "small": True, "x": [1, 5, 10, 12], "out": [9, 9],
     "channels_last": True, "outliers": True},
    {"name": "warp_16x64x128x128", "small": False, "x": [16, 64, 128, 128], "out": [128, 128]},
    {"name": "odd_4x96x250x333_to_301x199", "small": False, "x": [4, 96, 250, 333], "out": [301, 199],
     "outliers": True},
    {"name": "channels_last_8x128x64x64_to_96x96", "small": False, "x": [8, 128, 64, 64], "out": [96, 96],
     "channels_last": True},
    {"name": "few_channels_32x3x512x512", "small": False, "x": [32, 3, 512, 512], "out": [384, 384]},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x standard normal (outliers: 0.1% scaled by 10); grid uniform in [-1.15, 1.15] (so about 13%
    of the coordinates fall outside the image). A channels_last case draws NHWC and returns the NCHW
    permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["x"]
    oh, ow = case["out"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    grid = 2.3 * torch.rand(n, oh, ow, 2, generator=g, device=g.device) - 1.15
    x, grid = x.to(device), grid.to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, grid), {}


def cost(case: dict) -> dict:
    n, c, h, w = case["x"]
    oh, ow = case["out"]
    # `min_bytes`: only the pixels the drawn grid samples are read (none where it points outside)
    return {"flops": 8 * n * c * oh * ow, "bytes": 4 * (n * c * h * w + 2 * n * oh * ow + n * c * oh * ow),
            "min_bytes": 4 * (2 * n * oh * ow + n * c * oh * ow)}
