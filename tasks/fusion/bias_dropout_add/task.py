"""Fused bias + dropout + residual add (Megatron-style `bias_dropout_add`), with the dropout keep
mask given as an input so the result is deterministic.

Implement `bias_dropout_add(x, bias, residual, keep_mask, p)` for `x` and `residual` of shape
`[..., E]`, `bias` of shape `[E]`, a bool `keep_mask` of the shape of x, and a Python float
dropout probability `0 <= p < 1`, returning a new tensor:

    out = residual + (x + bias) * keep_mask / (1 - p)      # float32 math, rounded once to x.dtype

(dropped elements contribute 0; kept ones are scaled by 1 / (1 - p)).

- `x`, `bias`, `residual` share a dtype (float32, float16 or bfloat16) and are contiguous, on the
  GPU; `keep_mask` is a contiguous bool tensor. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def bias_dropout_add(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, keep_mask: torch.Tensor,
                     p: float) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    y = (x.float() + bias.float()) * keep_mask.float() * (1.0 / (1.0 - p))
    return (residual.float() + y).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "p": 0.1, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [2, 5, 256], "p": 0.3, "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [6, 500], "p": 0.1, "dtype": "bfloat16",
     "outliers": True},
    {"name": "p0_small", "small": True, "shape": [7, 33], "p": 0.0, "dtype": "float32"},
    {"name": "programs_small", "small": True, "shape": [40, 250], "p": 0.1, "dtype": "float32"},
    {"name": "bf16_8x2048x4096", "small": False, "shape": [8, 2048, 4096], "p": 0.1, "dtype": "bfloat16"},
    {"name": "fp16_16384x5120_outliers", "small": False, "shape": [16384, 5120], "p": 0.2, "dtype": "float16",
     "outliers": True},
    {"name": "fp32_4100x4096", "small": False, "shape": [4100, 4096], "p": 0.1, "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); bias: 0.5 * normal; residual: standard
    normal; keep_mask: Bernoulli(1 - p)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    x = normal(g, shape, case.get("outliers"))
    bias = 0.5 * torch.randn(shape[-1], generator=g, device=g.device)
    residual = torch.randn(shape, generator=g, device=g.device)
    keep = torch.rand(shape, generator=g, device=g.device) >= case["p"]
    dtype = getattr(torch, case["dtype"])
    x, bias, residual = (t.to(dtype).to(device) for t in (x, bias, residual))
    return (x, bias, residual, keep.to(device), case["p"]), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: x (and bias) need not be read where the keep mask drops, and any share may drop
    x_bias = (n + case["shape"][-1]) * size if case["p"] == 0 else 0
    return {"flops": 4 * n, "bytes": 3 * n * size + n + case["shape"][-1] * size,
            "min_bytes": 2 * n * size + n + x_bias}
