"""Row-wise cosine similarity.

Implement `cosine_similarity(x1, x2, eps=1e-8)`: for float32 `x1` of shape [R, D] and float32
`x2` of shape [R, D] or [1, D] (one row broadcast against every row of x1), return a new float32
tensor `out` [R] with

    n1[r] = max(sqrt(sum over d of x1[r, d] ** 2), eps)
    n2[r] = max(sqrt(sum over d of x2[r, d] ** 2), eps)      # row 0 of x2 if it has one row
    out[r] = sum over d of (x1[r, d] / n1[r]) * (x2[r, d] / n2[r])

This is `torch.nn.functional.cosine_similarity(x1, x2, dim=-1, eps=eps)`. Note that each norm is
clamped to eps separately (not their product).

- R and D are arbitrary (D may be 1). Accumulate in float32. Some rows of x1 may be tiny (norm
  below eps), where the clamp decides the result. Rows need not be adjacent (for example the first
  D columns of a wider tensor). Inputs must not be modified.

Compared with the PyTorch call above with rtol = 1e-4 and atol = 1e-5 (the order of the additions
and of the divisions is free: dividing the dot product by n1 * n2 once is equally acceptable).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "LinearAlgebra"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-5)}


def cosine_similarity(x1: torch.Tensor, x2: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.cosine_similarity(x1, x2, dim=-1, eps=eps)


CASES = [
    {"name": "small", "small": True, "r": 16, "d": 1000},
    {"name": "broadcast_small", "small": True, "r": 100, "d": 37, "broadcast": True},
    {"name": "d1_small", "small": True, "r": 500, "d": 1},
    {"name": "tiny_rows_eps_small", "small": True, "r": 64, "d": 64, "tiny": True, "eps": 1e-3},
    {"name": "sliced_outliers_small", "small": True, "r": 33, "d": 200, "sliced": True, "outliers": True},
    {"name": "r65536_d768", "small": False, "r": 65536, "d": 768},
    {"name": "broadcast_262144x256_outliers", "small": False, "r": 262144, "d": 256, "broadcast": True,
     "outliers": True},
    {"name": "sliced_8192x4099", "small": False, "r": 8192, "d": 4099, "sliced": True},
    {"name": "tiny_rows_32768x1000", "small": False, "r": 32768, "d": 1000, "tiny": True, "eps": 1e-4},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x1 standard normal (outliers: 0.1% scaled by 10); x2 = 0.6 * x1 + 0.8 * noise (or a single
    standard normal row when broadcast), so similarities spread over [-1, 1] away from 0. `tiny`
    scales one x1 row in 8 by 1e-6 / sqrt(D), putting its norm below eps. A sliced case returns the
    first D columns of tensors 3 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    r, d = case["r"], case["d"]
    width = d + 3 if case.get("sliced") else d
    x1 = normal(g, [r, width], case.get("outliers"))
    sign = torch.where(torch.rand(r, 1, generator=g, device=g.device) < 0.5, -1.0, 1.0)
    if case.get("broadcast"):
        x2 = torch.randn(1, width, generator=g, device=g.device)
    else:
        x2 = sign * (0.6 * x1 + 0.8 * torch.randn(r, width, generator=g, device=g.device))
    if case.get("tiny"):
        x1 = torch.where(torch.arange(r, device=device)[:, None] % 8 == 3, x1 * (1e-6 / d ** 0.5), x1)
    x1, x2 = x1.to(device), x2.to(device)
    if case.get("sliced"):
        x1, x2 = x1[:, :d], x2[:, :d]
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x1, x2), kwargs


def cost(case: dict) -> dict:
    r, d = case["r"], case["d"]
    rows2 = 1 if case.get("broadcast") else r
    return {"flops": 6 * r * d, "bytes": 4 * (r * d + rows2 * d + r)}
