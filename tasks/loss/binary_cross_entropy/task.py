"""Binary cross-entropy on probabilities (mean reduction), with PyTorch's log clamping.

Implement `binary_cross_entropy(input, target)`: for float32 probabilities `input` (values in
[0, 1], including exactly 0 and exactly 1) and float32 targets `target` in [0, 1] (hard 0/1
labels and soft labels) of the same shape, return a new 0-dim float32 tensor holding the mean
over all elements of

    l = -( target * max(log(input), -100) + (1 - target) * max(log(1 - input), -100) )

The clamp of each log at -100 is PyTorch's: it keeps log(0) = -inf from producing inf or NaN
(0 * -inf), so an input of exactly 0 or 1 costs at most 100 per element. This is
`torch.nn.functional.binary_cross_entropy(input, target)` (reduction="mean", no weights).

- Contiguous tensors of 1 or 2 dimensions with arbitrary sizes (at least one element).
- Compute the logs in float32 and accumulate in float32. Two calls on the same inputs must
  return bit-identical results (no floating-point atomics in an arbitrary order). Do all the
  computation, the final division included, on the GPU. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def binary_cross_entropy(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.binary_cross_entropy(input, target)


CASES = [
    {"name": "hard_labels_small", "small": True, "shape": [37, 41], "soft": False},
    {"name": "soft_labels_1d_small", "small": True, "shape": [12345], "soft": True},
    {"name": "size1", "small": True, "shape": [1], "soft": True},
    {"name": "extremes_small", "small": True, "shape": [64, 65], "soft": False, "extremes": 0.05},
    {"name": "hard_labels_64M", "small": False, "shape": [8192, 8192], "soft": False, "extremes": 1e-4},
    {"name": "soft_labels_odd_extremes", "small": False, "shape": [5003, 3001], "soft": True, "extremes": 1e-3},
    {"name": "soft_1d_16M", "small": False, "shape": [16777216], "soft": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input = sigmoid(2 * normal); `extremes` sets that fraction of inputs to exactly 0 or 1
    (half each), probably disagreeing with the label (clamped logs). target: Bernoulli(0.5) labels
    (hard) or uniform in [0, 1] (soft)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    x = torch.sigmoid(2 * torch.randn(shape, generator=g, device=g.device))
    if case.get("extremes"):
        u = torch.rand(shape, generator=g, device=g.device)
        f = case["extremes"]
        x = torch.where(u < f / 2, 0.0, torch.where(u > 1 - f / 2, 1.0, x))
    if case["soft"]:
        target = torch.rand(shape, generator=g, device=g.device)
    else:
        target = (torch.rand(shape, generator=g, device=g.device) < 0.5).float()
    return (x.to(device), target.to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": 8 * n, "bytes": 8 * n + 4}
