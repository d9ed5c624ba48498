"""1-D average pooling.

Implement `avg_pool1d(x, kernel_size, stride)` for `x` of shape [N, C, L], returning a new tensor
[N, C, L_out] of the dtype of `x` with

    L_out = (L - kernel_size) // stride + 1
    out[n, c, j] = (x[n, c, j * stride] + ... + x[n, c, j * stride + kernel_size - 1]) / kernel_size

i.e. `torch.nn.functional.avg_pool1d(x, kernel_size, stride)` with no padding and
ceil_mode=False (a trailing partial window is dropped).

- `x` is float32, float16 or bfloat16 on the GPU and may be non-contiguous (for example the
  [N, C, L] permuted view of an [N, L, C] tensor). 1 <= kernel_size <= L and stride >= 1;
  windows may overlap (stride < kernel_size) or skip elements (stride > kernel_size).
- Sum in float32, divide by kernel_size, round once to the dtype of `x`. Inputs must not be
  modified.

Compared with the PyTorch call above using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Pooling"
LEVEL = 2


def avg_pool1d(x: torch.Tensor, kernel_size: int, stride: int) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.avg_pool1d(x, kernel_size, stride)


CASES = [
    {"name": "k3_s2_small", "small": True, "shape": [2, 3, 100], "kernel_size": 3, "stride": 2, "dtype": "float32"},
    {"name": "fp16_k4_s4_small", "small": True, "shape": [4, 8, 1023], "kernel_size": 4, "stride": 4,
     "dtype": "float16"},
    {"name": "bf16_k5_s1_small", "small": True, "shape": [1, 6, 777], "kernel_size": 5, "stride": 1,
     "dtype": "bfloat16"},
    {"name": "window_is_whole_row_small", "small": True, "shape": [3, 5, 17], "kernel_size": 17, "stride": 1,
     "dtype": "float32"},
    {"name": "k2_s3_skipping_small", "small": True, "shape": [2, 4, 301], "kernel_size": 2, "stride": 3,
     "dtype": "float32"},
    {"name": "permuted_small", "small": True, "shape": [2, 16, 130], "kernel_size": 3, "stride": 2,
     "dtype": "float32", "permuted": True},
    {"name": "outliers_small", "small": True, "shape": [2, 4, 2000], "kernel_size": 7, "stride": 3,
     "dtype": "float32", "outliers": True},
    {"name": "fp32_64x512x4096_k4_s4", "small": False, "shape": [64, 512, 4096], "kernel_size": 4, "stride": 4,
     "dtype": "float32"},
    {"name": "fp16_32x768x8191_k3_s2_outliers", "small": False, "shape": [32, 768, 8191], "kernel_size": 3,
     "stride": 2, "dtype": "float16", "outliers": True},
    {"name": "bf16_16x1024x4096_k8_s1", "small": False, "shape": [16, 1024, 4096], "kernel_size": 8, "stride": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_permuted_32x1024x2048_k2_s2", "small": False, "shape": [32, 1024, 2048], "kernel_size": 2,
     "stride": 2, "dtype": "float32", "permuted": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values plus 1 (outliers: 0.1% of the normals scaled by 10), so window
    means are far from zero. A permuted case draws [N, L, C] and returns the [N, C, L] view."""
    g = torch.Generator(device).manual_seed(seed)
    n, c, length = case["shape"]
    shape = [n, length, c] if case.get("permuted") else [n, c, length]
    x = normal(g, shape, case.get("outliers"))
    x = (x + 1).to(getattr(torch, case["dtype"])).to(device)
    if case.get("permuted"):
        x = x.permute(0, 2, 1)
    return (x, case["kernel_size"], case["stride"]), {}


def cost(case: dict) -> dict:
    n, c, length = case["shape"]
    k, s = case["kernel_size"], case["stride"]
    l_out = (length - k) // s + 1
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    n_in = n * c * (length if s <= k else l_out * k)  # elements that must be read
    return {"flops": n * c * l_out * k, "bytes": (n_in + n * c * l_out) * size}
