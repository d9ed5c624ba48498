"""Linear layer with fused bias and ReLU epilogue: `relu(x @ weight.T + bias)`.

Implement `matmul_bias_relu(x, weight, bias)` for activations `x` of shape `[M, K]`, a weight in
PyTorch's linear layout `[N, K]` and a bias `[N]`, returning a new tensor `[M, N]`:

    out[m, n] = max(sum over k of x[m, k] * weight[n, k] + bias[n], 0)

- All inputs share a dtype, float16 or bfloat16, on the GPU. Accumulate in float32 and round once
  to the dtype after the bias and ReLU (the point of the fusion: no intermediate [M, N] tensor).
- M, N and K are arbitrary (not multiples of any block size; M may be 1). `x` and `weight` may be
  non-contiguous (for example `x` a column slice, or `weight` the transpose of a [K, N] tensor).
  Inputs must not be modified.

The result is compared with the reference below (PyTorch's half-precision linear, which rounds
the matmul result before the ReLU) using rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16,
which absorbs the different accumulation orders and the reference's intermediate rounding.
Inputs are scaled so that outputs are of order 1.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def matmul_bias_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (half-precision linear + ReLU)."""
    return torch.relu(torch.nn.functional.linear(x, weight, bias))


CASES = [
    {"name": "square_small", "small": True, "m": 32, "n": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 19, "n": 37, "k": 45, "dtype": "float16"},
    {"name": "m1_small", "small": True, "m": 1, "n": 40, "k": 24, "dtype": "float16"},
    {"name": "w_transposed_outliers_small", "small": True, "m": 24, "n": 20, "k": 48, "dtype": "float16",
     "w_transposed": True, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "n": 140, "k": 100, "dtype": "float16"},
    {"name": "fp16_4096x4096x4096", "small": False, "m": 4096, "n": 4096, "k": 4096, "dtype": "float16"},
    {"name": "bf16_8192x11008x4096", "small": False, "m": 8192, "n": 11008, "k": 4096, "dtype": "bfloat16"},
    {"name": "fp16_odd_3000x5000x2000_outliers", "small": False, "m": 3000, "n": 5000, "k": 2000,
     "dtype": "float16", "outliers": True},
    {"name": "fp16_wt_2048x8192x1024", "small": False, "m": 2048, "n": 8192, "k": 1024, "dtype": "float16",
     "w_transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); weight: normal / sqrt(K); bias: 0.5 *
    normal. With `w_transposed`, weight is the `.t()` view of a contiguous [K, N] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    w = torch.randn([k, n] if case.get("w_transposed") else [n, k], generator=g, device=g.device) / k ** 0.5
    bias = 0.5 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    w = w.to(dtype).to(device)
    if case.get("w_transposed"):
        w = w.t()
    return (x.to(dtype).to(device), w, bias.to(dtype).to(device)), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k + 2 * m * n, "bytes": 2 * (m * k + n * k + n + m * n)}
