"""Affine warp: affine_grid followed by bilinear grid_sample, fused (align_corners=False).

Implement `grid_sample_affine(x, theta, out_h, out_w)`: for float32 `x` [N, C, H, W] and float32
affine matrices `theta` [N, 2, 3], return a new float32 tensor `out` [N, C, out_h, out_w]. It is

    grid = torch.nn.functional.affine_grid(theta, [N, C, out_h, out_w], align_corners=False)
    out  = torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="zeros",
                                           align_corners=False)

without materializing `grid`. Spelled out, for output pixel (i, j) of sample n (compute in
float32):

    xn = (2 * j + 1) / out_w - 1,   yn = (2 * i + 1) / out_h - 1          # pixel centre in [-1, 1]
    gx = theta[n, 0, 0] * xn + theta[n, 0, 1] * yn + theta[n, 0, 2]
    gy = theta[n, 1, 0] * xn + theta[n, 1, 1] * yn + theta[n, 1, 2]
    ix = ((gx + 1) * W - 1) / 2,   iy = ((gy + 1) * H - 1) / 2
    x0 = floor(ix), y0 = floor(iy), x1 = x0 + 1, y1 = y0 + 1
    wx1 = ix - x0, wx0 = 1 - wx1, wy1 = iy - y0, wy0 = 1 - wy1
    out[n, c, i, j] = wy0 * wx0 * X(y0, x0) + wy0 * wx1 * X(y0, x1) + wy1 * wx0 * X(y1, x0) + wy1 * wx1 * X(y1, x1)

where X(r, s) = x[n, c, r, s] inside the image and 0 outside (zero padding).

- The transforms mix rotation, scaling, shear and translation, so parts of the output sample
  outside the image (0 there). N, C, H, W, out_h, out_w are arbitrary (out_h or out_w may be 1).
  `x` may be non-contiguous (in particular channels-last memory: a permuted NHWC tensor).
  Inputs must not be modified.

The reference evaluates this in float64 and rounds to float32. Compared with rtol = atol = 1e-3:
a float32 source coordinate of a few hundred pixels carries a rounding error of about 3e-5
pixels, and the image changes by several units per pixel (tens near outliers), so any float32
evaluation order (PyTorch's own float32 kernels included) is off by up to about 4e-4.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "SpatialOps"
LEVEL = 5
TOLERANCE = {"float32": (1e-3, 1e-3)}


def grid_sample_affine(x: torch.Tensor, theta: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """PyTorch reference, evaluated in float64."""
    n, c = x.shape[0], x.shape[1]
    grid = torch.nn.functional.affine_grid(theta.double(), [n, c, out_h, out_w], align_corners=False)
    out = torch.nn.functional.grid_sample(x.double(), grid, mode="bilinear", padding_mode="zeros",
                                          align_corners=False)
    return out.float()


CASES = [
    {"name": "small", "small": True, "x": [1, 3, 12, 15], "out": [10, 11]},
    {"name": "batched_small", "small": True, "x": [2, 2, 9, 7], "out": [13, 6]},
    {"name": "one_row_out_small", "small": True, "x": [2, 3, 8, 8], "out": [1, 20]},
    {"name": "one_column_out_small", "small": True, "x": [1, 2, 8, 10], "out": [15, 1]},
    {"name": "channels_last_outliers_small", "small": True, "x": [1, 5, 10, 12], "out": [9, 9],
     "channels_last": True, "outliers": True},
    {"name": "augment_64x3x224x224", "small": False, "x": [64, 3, 224, 224], "out": [224, 224]},
    {"name": "stn_16x64x128x128_to_96x96", "small": False, "x": [16, 64, 128, 128], "out": [96, 96]},
    {"name": "odd_4x96x250x333_to_301x199_outliers", "small": False, "x": [4, 96, 250, 333], "out": [301, 199],
     "outliers": True},
    {"name": "channels_last_8x128x64x64", "small": False, "x": [8, 128, 64, 64], "out": [64, 64],
     "channels_last": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x standard normal (outliers: 0.1% scaled by 10). theta per sample: rotation by an angle in
    [-0.5, 0.5] rad, scale in [0.8, 1.25] per axis, shear in [-0.2, 0.2], translation in
    [-0.25, 0.25]. A channels_last case draws NHWC and returns the NCHW permuted view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, h, w = case["x"]
    oh, ow = case["out"]
    shape = [n, h, w, c] if case.get("channels_last") else [n, c, h, w]
    x = normal(g, shape, case.get("outliers"))
    u = torch.rand(n, 6, generator=g, device=g.device)
    ang, sx, sy = (u[:, 0] - 0.5), 0.8 + 0.45 * u[:, 1], 0.8 + 0.45 * u[:, 2]
    shear, tx, ty = 0.4 * u[:, 3] - 0.2, 0.5 * u[:, 4] - 0.25, 0.5 * u[:, 5] - 0.25
    cos, sin = torch.cos(ang), torch.sin(ang)
    theta = torch.stack([torch.stack([sx * cos, -sy * sin + shear, tx], dim=-1),
                         torch.stack([sx * sin, sy * cos, ty], dim=-1)], dim=1)
    x, theta = x.to(device), theta.to(device)
    if case.get("channels_last"):
        x = x.permute(0, 3, 1, 2)
    return (x, theta, oh, ow), {}


def cost(case: dict) -> dict:
    n, c, h, w = case["x"]
    oh, ow = case["out"]
    # `min_bytes`: only the pixels the drawn warp samples are read
    return {"flops": 8 * n * c * oh * ow + 10 * n * oh * ow, "bytes": 4 * (n * c * h * w + 6 * n + n * c * oh * ow),
            "min_bytes": 4 * (6 * n + n * c * oh * ow)}
