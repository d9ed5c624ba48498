"""Log-sum-exp over one dimension.

Implement `logsumexp(x, dim=-1, keepdim=False)`: return

    y[...] = ln( exp(x[..., 0, ...]) + exp(x[..., 1, ...]) + ... + exp(x[..., L-1, ...]) )

with the shape of `x` without dimension `dim` (kept with size 1 when `keepdim` is True) and the dtype of `x`.

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is any
  valid dimension (negative values count from the end) and L = x.shape[dim] >= 1. `x` may be
  non-contiguous (for example a transposed 2-D view, where the reduced dimension is strided).
- It must not overflow or underflow: |x| reaches about 150 (exp overflows float32 beyond 88.7), so
  subtract the slice maximum (or keep a running maximum). Accumulate in float32 and round once.
- -inf entries (masked positions) contribute nothing; a slice that is entirely -inf gives -inf.
  Inputs hold no NaN and no +inf.
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.logsumexp(x, dim=dim, keepdim=keepdim)`: shape and dtype must
match exactly, infinities must sit in the same places, and finite values use the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Reduce"
LEVEL = 3


def logsumexp(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """PyTorch reference."""
    return torch.logsumexp(x, dim=dim, keepdim=keepdim)


CASES = [
    {"name": "fp32_lastdim_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32"},
    {"name": "fp16_dim0_small", "small": True, "shape": [300, 8], "dim": 0, "dtype": "float16"},
    {"name": "bf16_3d_middle_small", "small": True, "shape": [3, 150, 5], "dim": 1, "dtype": "bfloat16"},
    {"name": "vector_small", "small": True, "shape": [3001], "dim": 0, "dtype": "float32"},
    {"name": "len1_keepdim_small", "small": True, "shape": [100, 1], "dim": -1, "dtype": "float32",
     "keepdim": True},
    {"name": "transposed_small", "small": True, "shape": [129, 30], "dim": -1, "dtype": "float32", "view": "t"},
    {"name": "outliers_keepdim_small", "small": True, "shape": [40, 81], "dim": 0, "dtype": "float32",
     "outliers": True, "keepdim": True},
    {"name": "masked_small", "small": True, "shape": [24, 150], "dim": -1, "dtype": "float32", "masked": True},
    {"name": "fp16_masked_dim0_small", "small": True, "shape": [150, 24], "dim": 0, "dtype": "float16",
     "masked": True},
    {"name": "fp32_8192x8192_lastdim", "small": False, "shape": [8192, 8192], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_256x2048x128_middle", "small": False, "shape": [256, 2048, 128], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_4096x8191_lastdim", "small": False, "shape": [4096, 8191], "dim": -1,
     "dtype": "float32", "view": "t"},
    {"name": "fp32_masked_16384x2048", "small": False, "shape": [16384, 2048], "dim": -1, "dtype": "float32",
     "masked": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with standard deviation 3 (outliers: 0.1% of the normals scaled by 10); a masked
    case sets 10% of the values to -inf and one whole slice along dim to -inf."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = 3 * z
    if case.get("masked"):  # 10% -inf, and one whole slice along dim is -inf (masked cases are 2-D)
        x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.1, float("-inf"), x)
        x.select(1 - case["dim"] % 2, 0).fill_(float("-inf"))
    return (finish(x, case, device),), {"dim": case["dim"], "keepdim": case.get("keepdim", False)}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    rows = n // case["shape"][case["dim"]]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 4 * n, "bytes": n * size + rows * size}
