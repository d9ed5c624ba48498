"""Mean squared error loss (mean reduction).

Implement `mse_loss(input, target)`: for float32 tensors `input` and `target` of the same shape,
return a new 0-dim float32 tensor holding

    mean over all elements p of (input[p] - target[p]) ** 2

This is `torch.nn.functional.mse_loss(input, target)` (reduction="mean").

- Any shape with 1 to 3 dimensions and at least one element; sizes are arbitrary. `input` may be
  non-contiguous (for example a transposed matrix); `target` is contiguous.
- Accumulate in float32. Two calls on the same inputs must return bit-identical results, so
  partial sums may not be combined with floating-point atomics in an arbitrary order: combine
  them in a fixed order (for example with a second small kernel). Do all the computation, the
  final division included, on the GPU. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def mse_loss(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.mse_loss(input, target)


CASES = [
    {"name": "small", "small": True, "shape": [37, 41]},
    {"name": "1d_odd_small", "small": True, "shape": [12345]},
    {"name": "size1", "small": True, "shape": [1]},
    {"name": "3d_small", "small": True, "shape": [3, 17, 29]},
    {"name": "transposed_outliers_small", "small": True, "shape": [60, 70], "transposed": True, "outliers": True},
    {"name": "n_64M", "small": False, "shape": [8192, 8192]},
    {"name": "odd_3d_outliers", "small": False, "shape": [7, 3001, 1999], "outliers": True},
    {"name": "transposed_6000x5000", "small": False, "shape": [6000, 5000], "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input standard normal (outliers: 0.1% scaled by 10); target = 0.8 * input + 0.6 * normal + 0.3.
    A transposed case passes input as the `.t()` view of a contiguous tensor."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    t = case.get("transposed", False)
    x = torch.randn(shape[::-1] if t else shape, generator=g, device=g.device)
    if case.get("outliers"):
        x = torch.where(torch.rand(x.shape, generator=g, device=g.device) < 0.001, x * 10, x)
    if t:
        x = x.t()
    target = (0.8 * x + 0.6 * torch.randn(shape, generator=g, device=g.device) + 0.3).contiguous()
    if t:
        x = x.t().contiguous().to(device).t()
    else:
        x = x.to(device)
    return (x, target.to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 3 * n, "bytes": 8 * n + 4}
