"""Cross product of 3-vectors.

Implement `cross(a, b)`: for float32 tensors `a` and `b` of the same shape [R, 3] (R vectors of
three components each), return a new float32 tensor `out` of shape [R, 3] with

    out[r, 0] = a[r, 1] * b[r, 2] - a[r, 2] * b[r, 1]
    out[r, 1] = a[r, 2] * b[r, 0] - a[r, 0] * b[r, 2]
    out[r, 2] = a[r, 0] * b[r, 1] - a[r, 1] * b[r, 0]

This is `torch.linalg.cross(a, b, dim=-1)`.

- R is arbitrary (R may be 1). `a` and `b` may be non-contiguous: in particular they may be the
  `.t()` view of a contiguous [3, R] tensor (structure-of-arrays layout, components stored as
  three separate rows). Inputs must not be modified.

Compared with the PyTorch call above with rtol = 1e-5 and atol = 1e-4: a fused multiply-add in
either difference changes the result by up to half an ulp of the products, which is larger than
1e-5 when an outlier (scaled by 10) meets a large component.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 2
TOLERANCE = {"float32": (1e-5, 1e-4)}


def cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.linalg.cross(a, b, dim=-1)


CASES = [
    {"name": "small", "small": True, "r": 1000},
    {"name": "one_vector_small", "small": True, "r": 1},
    {"name": "odd_small", "small": True, "r": 1777},
    {"name": "soa_small", "small": True, "r": 999, "soa": True},
    {"name": "outliers_small", "small": True, "r": 1234, "outliers": True},
    {"name": "r_8M", "small": False, "r": 8388608},
    {"name": "r_odd_outliers", "small": False, "r": 6000001, "outliers": True},
    {"name": "soa_8M", "small": False, "r": 8388608, "soa": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal components (outliers: 0.1% scaled by 10). A `soa` case draws [3, R] tensors
    and returns their `.t()` views."""
    g = torch.Generator(device).manual_seed(seed)
    r = case["r"]
    shape = [3, r] if case.get("soa") else [r, 3]
    out = []
    for _ in range(2):
        v = normal(g, shape, case.get("outliers"))
        v = v.to(device)
        out.append(v.t() if case.get("soa") else v)
    return tuple(out), {}


def cost(case: dict) -> dict:
    r = case["r"]
    return {"flops": 9 * r, "bytes": 4 * 9 * r}
