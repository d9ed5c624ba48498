"""Linear layer with fused bias and residual add (a transformer block's output projection
writing back into the residual stream): `x @ weight.T + bias + residual`.

Implement `matmul_add_residual(x, weight, bias, residual)` for `x` `[M, K]`, a weight in PyTorch's
linear layout `[N, K]`, a bias `[N]` and a residual `[M, N]`, returning a new tensor `[M, N]`:

    out[m, n] = sum over k of x[m, k] * weight[n, k] + bias[n] + residual[m, n]

- All inputs share a dtype, float16 or bfloat16, on the GPU. Accumulate in float32 and round once.
- M, N and K are arbitrary (M may be 1). `x` and `residual` are contiguous; `weight` may be
  non-contiguous (for example the transpose of a contiguous [K, N] tensor). Inputs must not be
  modified; the output must be a new tensor.

The result is compared with the reference below (PyTorch's half-precision linear, rounded before
the residual add) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def matmul_add_residual(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                        residual: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (half-precision linear, then the residual add)."""
    return torch.nn.functional.linear(x, weight, bias) + residual


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_wt_small", "small": True, "m": 21, "n": 35, "k": 40, "dtype": "float16", "w_transposed": True},
    {"name": "m1_outliers_small", "small": True, "m": 1, "n": 64, "k": 32, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "fp16_8192x4096x4096", "small": False, "m": 8192, "n": 4096, "k": 4096, "dtype": "float16"},
    {"name": "bf16_4096x5120x13824_wt", "small": False, "m": 4096, "n": 5120, "k": 13824, "dtype": "bfloat16",
     "w_transposed": True},
    {"name": "fp16_odd_3000x4100x2000_outliers", "small": False, "m": 3000, "n": 4100, "k": 2000,
     "dtype": "float16", "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); weight: normal / sqrt(K); bias: 0.5 *
    normal; residual: standard normal. With `w_transposed`, weight is the `.t()` view of a
    contiguous [K, N] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    w = torch.randn([k, n] if case.get("w_transposed") else [n, k], generator=g, device=g.device) / k ** 0.5
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    residual = torch.randn(m, n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, w, bias, residual = (t.to(dtype).to(device) for t in (x, w, bias, residual))
    if case.get("w_transposed"):
        w = w.t()
    return (x, w, bias, residual), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k + 2 * m * n, "bytes": 2 * (m * k + n * k + n + 2 * m * n)}
