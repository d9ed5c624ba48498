"""Cross-entropy loss with mean reduction.

Implement `cross_entropy(logits, target)`: the mean over rows of the negative log-likelihood of
the target class under a softmax of the logits,

    loss_i = logsumexp(logits[i, :]) - logits[i, target[i]]
    result = (loss_0 + ... + loss_{N-1}) / N

returned as a new 0-dim float32 tensor.

- `logits` is float32 of shape [N, C] on the GPU (N >= 1, C >= 2); its rows may be strided (for
  example the first C columns of a wider tensor).
- `target` is int64 of shape [N] with every value in [0, C) (no ignored entries).
- Compute logsumexp stably (subtract the row maximum). Do all the computation, including the
  final mean, on the GPU. Inputs must not be modified.

The result is compared with `torch.nn.functional.cross_entropy(logits, target)` with
rtol = atol = 1e-4 (the order of the additions in the row sums and the mean is free).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (mean reduction)."""
    return torch.nn.functional.cross_entropy(logits, target)


CASES = [
    {"name": "small", "small": True, "n": 16, "c": 1000},
    {"name": "one_row_small", "small": True, "n": 1, "c": 5000},
    {"name": "few_classes_small", "small": True, "n": 300, "c": 37},
    {"name": "sliced_small", "small": True, "n": 20, "c": 777, "sliced": True},
    {"name": "outliers_small", "small": True, "n": 8, "c": 4096, "outliers": True},
    {"name": "many_rows_small", "small": True, "n": 4100, "c": 5},
    {"name": "vocab_4096x50257", "small": False, "n": 4096, "c": 50257},
    {"name": "vocab_16384x32000_outliers", "small": False, "n": 16384, "c": 32000, "outliers": True},
    {"name": "classes_262144x100", "small": False, "n": 262144, "c": 100},
    {"name": "sliced_8192x32000", "small": False, "n": 8192, "c": 32000, "sliced": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """logits: 3 * standard normal (outliers: 0.1% scaled by 10); targets uniform in [0, C).
    A sliced case returns the first C columns of an [N, C + 5] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    n, c = case["n"], case["c"]
    shape = [n, c + 5] if case.get("sliced") else [n, c]
    logits = normal(g, shape, case.get("outliers"), 3)
    target = torch.randint(0, c, (n,), generator=g, dtype=torch.int64, device=g.device)
    logits = logits.to(device)
    if case.get("sliced"):
        logits = logits[:, :c]
    return (logits, target.to(device)), {}


def cost(case: dict) -> dict:
    n, c = case["n"], case["c"]
    return {"flops": 4 * n * c, "bytes": 4 * n * c + 8 * n + 4}
