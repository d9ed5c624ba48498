"""Row-wise dot product (vecdot over the last dimension).

Implement `vecdot(x, y)`: for `x` and `y` of the same shape [..., D] and dtype, return a new
tensor `out` of shape [...] (the last dimension removed) and that dtype with

    out[...] = sum over d of x[..., d] * y[..., d]

- dtype is float32 or float16. Accumulate in float32 and round the sum once to the output dtype.
  (PyTorch's float16 path rounds each product to float16 before summing in float32; exact float32
  products are equally acceptable within the tolerance.)
- D and the number of rows are arbitrary (D may be 1; there may be a single row). `x` and `y` have
  2 or 3 dimensions; their rows need not be adjacent (for example the first D columns of a wider
  tensor). Inputs must not be modified.

The result is compared with `torch.linalg.vecdot(x, y, dim=-1)`; the order of the additions is
free, so float32 uses rtol = atol = 1e-4 and float16 the default 5e-3. Inputs are scaled by
D**-0.25 so sums have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (1e-4, 1e-4)}


def vecdot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.linalg.vecdot(x, y, dim=-1)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [16, 1000], "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [3, 5, 129], "dtype": "float16"},
    {"name": "d1_small", "small": True, "shape": [1000, 1], "dtype": "float32"},
    {"name": "one_row_small", "small": True, "shape": [1, 4099], "dtype": "float32"},
    {"name": "sliced_outliers_small", "small": True, "shape": [40, 77], "dtype": "float32", "sliced": True,
     "outliers": True},
    {"name": "fp32_65536x512", "small": False, "shape": [65536, 512], "dtype": "float32"},
    {"name": "fp16_8x4096x1000_outliers", "small": False, "shape": [8, 4096, 1000], "dtype": "float16",
     "outliers": True},
    {"name": "fp32_sliced_16384x3000", "small": False, "shape": [16384, 3000], "dtype": "float32",
     "sliced": True},
    {"name": "fp32_1048576x33", "small": False, "shape": [1048576, 33], "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal entries scaled by D**-0.25 (outliers: 0.1% scaled by 10). A sliced case
    returns the first D columns of tensors 5 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    full = shape[:-1] + [d + 5] if case.get("sliced") else shape
    dtype = getattr(torch, case["dtype"])
    s = d ** -0.25
    x = (normal(g, full, case.get("outliers", False)) * s).to(dtype).to(device)
    y = (normal(g, full, case.get("outliers", False)) * s).to(dtype).to(device)
    if case.get("sliced"):
        x, y = x[..., :d], y[..., :d]
    return (x, y), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][-1]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 2 * n, "bytes": (2 * n + rows) * size}
