"""Linear layer (x @ W^T + b), half precision.

Implement `linear(x, weight, bias)`: for float16 activations `x` [..., K] (2-D or 3-D), a float16
weight [N, K] (PyTorch's nn.Linear layout: one row per output feature) and a float16 bias [N],
return a new float16 tensor `out` [..., N] with

    out[..., j] = float16( sum over k of x[..., k] * weight[j, k] + bias[j] )

This is `torch.nn.functional.linear(x, weight, bias)`.

- Accumulate in float32, add the bias in float32 and round once to float16.
- The leading dimensions, K and N are arbitrary (not multiples of any block size; a single token
  may occur). `x` may be non-contiguous (for example a slice of a wider tensor); weight and bias
  are contiguous. Inputs must not be modified.

Compared with the PyTorch call above using rtol = atol = 1e-2. x and weight are standard normal
scaled by K**-0.25, so outputs have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2)}


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.linear(x, weight, bias)


CASES = [
    {"name": "small", "small": True, "x": [32, 32], "n": 32},
    {"name": "3d_odd_small", "small": True, "x": [2, 9, 40], "n": 24},
    {"name": "one_token_small", "small": True, "x": [1, 64], "n": 48},
    {"name": "sliced_small", "small": True, "x": [3, 8, 32], "n": 20, "sliced": True},
    {"name": "outliers_small", "small": True, "x": [16, 48], "n": 32, "outliers": True},
    {"name": "tiles_small", "small": True, "x": [136, 100], "n": 140},
    {"name": "mlp_up_8x1024x4096_to_11008", "small": False, "x": [8, 1024, 4096], "n": 11008},
    {"name": "decode_16x8192_to_8192", "small": False, "x": [16, 8192], "n": 8192},
    {"name": "odd_4x1000x3000_to_2999_outliers", "small": False, "x": [4, 1000, 3000], "n": 2999,
     "outliers": True},
    {"name": "sliced_4x2048x4096_to_4096", "small": False, "x": [4, 2048, 4096], "n": 4096, "sliced": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x and weight standard normal scaled by K**-0.25 (outliers in x: 0.1% scaled by 10); bias
    0.5 * standard normal. A sliced case returns the first K features of an x 8 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["x"])
    k, n = shape[-1], case["n"]
    full = shape[:-1] + [k + 8] if case.get("sliced") else shape
    s = k ** -0.25
    x = normal(g, full, case.get("outliers", False)) * s
    w = torch.randn(n, k, generator=g, device=g.device) * s
    b = 0.5 * torch.randn(n, generator=g, device=g.device)
    x, w, b = x.half().to(device), w.half().to(device), b.half().to(device)
    if case.get("sliced"):
        x = x[..., :k]
    return (x, w, b), {}


def cost(case: dict) -> dict:
    k, n = case["x"][-1], case["n"]
    m = 1
    for s in case["x"][:-1]:
        m *= s
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + n * k + n + m * n)}
