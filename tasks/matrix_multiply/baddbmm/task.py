"""Batched matrix multiplication plus a scaled, broadcast input (baddbmm), half precision.

Implement `baddbmm(input, batch1, batch2, beta=1.0, alpha=1.0)`: for float16 `batch1` [B, M, K],
`batch2` [B, K, N] and a float16 `input` broadcastable to [B, M, N] (its shape is one of
[B, M, N], [1, M, N], [B, 1, N] or [N]), return a new float16 tensor `out` [B, M, N] with

    out[p, i, j] = float16( beta * input[p, i, j] + alpha * (sum over k of batch1[p, i, k] * batch2[p, k, j]) )

where `input` is read with the usual broadcasting rules. This is `torch.baddbmm(input, batch1,
batch2, beta=beta, alpha=alpha)`, including its special case: when `beta == 0`, `input` is
ignored entirely, so NaN or Inf values in it do not propagate.

- Accumulate the products in float32, apply alpha, beta and input in float32, and round once to
  float16.
- B, M, N, K are arbitrary (not multiples of any block size; any may be 1). `batch2` may be the
  transpose of the last two dimensions of a contiguous [B, N, K] tensor. `beta` and `alpha` are
  Python floats. Inputs must not be modified.

Compared with the PyTorch call above using rtol = atol = 1e-2. batch1 and batch2 are standard
normal scaled by K**-0.25, so the products have unit scale.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "MatrixMultiply"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2)}


def baddbmm(input: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, beta: float = 1.0,
            alpha: float = 1.0) -> torch.Tensor:
    """PyTorch reference."""
    return torch.baddbmm(input, batch1, batch2, beta=beta, alpha=alpha)


CASES = [
    {"name": "full_input_small", "small": True, "b": 2, "m": 32, "n": 32, "k": 32, "input": "full",
     "beta": 1.0, "alpha": 1.0},
    {"name": "shared_mask_small", "small": True, "b": 3, "m": 20, "n": 24, "k": 16, "input": "shared",
     "beta": 1.0, "alpha": 0.25},
    {"name": "row_bias_scaled_small", "small": True, "b": 2, "m": 17, "n": 30, "k": 40, "input": "row",
     "beta": -0.5, "alpha": 2.0},
    {"name": "vector_bt_small", "small": True, "b": 1, "m": 1, "n": 48, "k": 32, "input": "vector",
     "beta": 2.0, "alpha": 1.0, "b_transposed": True},
    {"name": "beta0_inf_outliers_small", "small": True, "b": 2, "m": 16, "n": 16, "k": 48, "input": "full",
     "beta": 0.0, "alpha": 1.0, "inf_input": True, "outliers": True},
    {"name": "tiles_small", "small": True, "b": 2, "m": 136, "n": 140, "k": 100, "input": "full", "beta": 1.0,
     "alpha": 1.0},
    {"name": "attention_bias_64x1024x1024x128_bt", "small": False, "b": 64, "m": 1024, "n": 1024, "k": 128,
     "input": "shared", "beta": 1.0, "alpha": 0.08838834764831845, "b_transposed": True},
    {"name": "full_16x2048x2048x1024", "small": False, "b": 16, "m": 2048, "n": 2048, "k": 1024,
     "input": "full", "beta": 0.5, "alpha": 1.0},
    {"name": "odd_row_bias_10x1500x999x777_outliers", "small": False, "b": 10, "m": 1500, "n": 999, "k": 777,
     "input": "row", "beta": 1.0, "alpha": -1.0, "outliers": True},
]

_INPUT_SHAPES = {"full": lambda b, m, n: [b, m, n], "shared": lambda b, m, n: [1, m, n],
                 "row": lambda b, m, n: [b, 1, n], "vector": lambda b, m, n: [n]}


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input standard normal in the case's broadcast shape (`inf_input`: 2% set to +-Inf, only with
    beta = 0); batch1, batch2 standard normal scaled by K**-0.25 (outliers: 0.1% scaled by 10).
    With `b_transposed`, batch2 is `.transpose(1, 2)` of a contiguous [B, N, K] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    inp = torch.randn(_INPUT_SHAPES[case["input"]](bs, m, n), generator=g, device=g.device)
    if case.get("inf_input"):
        u = torch.rand(inp.shape, generator=g, device=g.device)
        inp = torch.where(u < 0.01, float("-inf"), torch.where(u > 0.99, float("inf"), inp))
    s = k ** -0.25
    bt = case.get("b_transposed", False)
    a = normal(g, [bs, m, k], case.get("outliers", False)) * s
    b = normal(g, [bs, n, k] if bt else [bs, k, n], case.get("outliers", False)) * s
    inp, a, b = inp.half().to(device), a.half().to(device), b.half().to(device)
    if bt:
        b = b.transpose(1, 2)
    return (inp, a, b), {"beta": case["beta"], "alpha": case["alpha"]}


def cost(case: dict) -> dict:
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    nin = 1
    for s in _INPUT_SHAPES[case["input"]](bs, m, n):
        nin *= s
    nin *= case.get("beta", 1.0) != 0  # beta == 0: `input` is never read
    return {"flops": 2 * bs * m * n * k + 3 * bs * m * n, "bytes": 2 * (bs * (m * k + k * n + m * n) + nin)}
