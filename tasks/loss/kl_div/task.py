"""Kullback-Leibler divergence loss (reduction "batchmean", probabilities as target).

Implement `kl_div(input, target)`: for float32 `input` [N, C] holding log-probabilities and
float32 `target` [N, C] holding probabilities (log_target=False), return a new 0-dim float32
tensor holding

    (sum over all i, c of  target[i, c] * (log(target[i, c]) - input[i, c]))  /  N

where a term with target[i, c] == 0 counts as exactly 0 (0 * log 0 = 0, as in xlogy). This is
`torch.nn.functional.kl_div(input, target, reduction="batchmean")`: the sum is divided by the
batch size N, not by the number of elements.

- N >= 1 and C >= 2 are arbitrary. Every row of `target` sums to 1 and contains exact zeros.
  `input` may have strided rows (for example the first C columns of a wider tensor); `target`
  is contiguous.
- Compute the logs in float32 and accumulate in float32. Two calls on the same inputs must return
  bit-identical results (no floating-point atomics in an arbitrary order). Do all the
  computation, the final division included, on the GPU. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def kl_div(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.kl_div(input, target, reduction="batchmean")


CASES = [
    {"name": "small", "small": True, "n": 16, "c": 100},
    {"name": "one_row_small", "small": True, "n": 1, "c": 3000},
    {"name": "two_classes_small", "small": True, "n": 500, "c": 2},
    {"name": "sliced_small", "small": True, "n": 33, "c": 77, "sliced": True},
    {"name": "peaked_outliers_small", "small": True, "n": 8, "c": 1000, "outliers": True},
    {"name": "programs_small", "small": True, "n": 150, "c": 100},
    {"name": "distill_4096x8192", "small": False, "n": 4096, "c": 8192},
    {"name": "sliced_16384x1000_outliers", "small": False, "n": 16384, "c": 1000, "sliced": True,
     "outliers": True},
    {"name": "rows_262144x100", "small": False, "n": 262144, "c": 100},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input = log_softmax(2 * normal) over each row (outliers: 0.1% of the logits scaled by 10);
    target = softmax(2 * normal) with 10% of each row's entries set to exactly 0 and the row
    renormalized. A sliced case returns input as the first C columns of a tensor 3 wider."""
    g = torch.Generator(device).manual_seed(seed)
    n, c = case["n"], case["c"]
    width = c + 3 if case.get("sliced") else c
    logits = normal(g, [n, width], case.get("outliers"), 2)
    inp = torch.log_softmax(logits[:, :c], dim=1)
    if case.get("sliced"):
        inp = torch.cat([inp, torch.zeros(n, 3, device=device)], dim=1)
    t = torch.softmax(2 * torch.randn(n, c, generator=g, device=g.device), dim=1)
    zero = torch.rand(n, c, generator=g, device=g.device) < 0.1
    zero[:, 0] = False  # keep at least one nonzero entry per row
    t = torch.where(zero, 0.0, t)
    t = t / t.sum(dim=1, keepdim=True)
    inp = inp.to(device)
    if case.get("sliced"):
        inp = inp[:, :c]
    return (inp, t.to(device)), {}


def cost(case: dict) -> dict:
    n, c = case["n"], case["c"]
    return {"flops": 4 * n * c, "bytes": 8 * n * c + 4}
