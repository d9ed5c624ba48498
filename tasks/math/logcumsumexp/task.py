"""Cumulative log-sum-exp along one dimension.

Implement `logcumsumexp(x, dim)`: return a new tensor with the shape and dtype of `x` where

    y[..., i, ...] = ln( exp(x[..., 0, ...]) + exp(x[..., 1, ...]) + ... + exp(x[..., i, ...]) )

(i along `dim`), i.e. a running log-sum-exp.

- `x` is a float32, float16 or bfloat16 tensor with at least one dimension, on the GPU; `dim` is
  any valid dimension (negative values count from the end). `x` may be non-contiguous (for example
  a transposed 2-D view, where the scanned dimension is strided); the output is contiguous.
- It must not overflow or underflow: |x| reaches about 150, so exp(x) leaves the float32 range in
  both directions, and an early element far below a later maximum still determines the early
  outputs. Round each output once to the dtype of `x`.
- -inf entries contribute nothing; a prefix that is entirely -inf gives -inf. Inputs hold no NaN
  and no +inf. Scans are long (up to 16384 elements).
- The input must not be modified and the output must not share memory with it.

The result is compared with `torch.logcumsumexp(x.float(), dim).to(x.dtype)`: shape and dtype must match exactly,
infinities must sit in the same places; float32 uses rtol = atol = 1e-4 (the combination order is
free), float16 and bfloat16 the default tolerance (5e-3 and 1e-2).
"""
import torch

from kbx_ray.taskkit import draw, finish

CATEGORY = "Math"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def logcumsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """PyTorch reference: computed in float32 and rounded once, as specified (on a GPU, torch's own
    half-precision scan along a non-last dimension drifts by several ulps from that)."""
    return torch.logcumsumexp(x.float(), dim).to(x.dtype)


CASES = [
    {"name": "fp32_lastdim_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32"},
    {"name": "fp16_dim0_small", "small": True, "shape": [300, 8], "dim": 0, "dtype": "float16"},
    {"name": "bf16_3d_middle_small", "small": True, "shape": [3, 150, 5], "dim": 1, "dtype": "bfloat16"},
    {"name": "vector_small", "small": True, "shape": [3001], "dim": 0, "dtype": "float32"},
    {"name": "len1_small", "small": True, "shape": [100, 1], "dim": -1, "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [129, 30], "dim": -1, "dtype": "float32", "view": "t"},
    {"name": "outliers_dim0_small", "small": True, "shape": [40, 81], "dim": 0, "dtype": "float32",
     "outliers": True},
    {"name": "masked_small", "small": True, "shape": [24, 150], "dim": -1, "dtype": "float32", "masked": True},
    {"name": "fp16_masked_dim0_small", "small": True, "shape": [150, 24], "dim": 0, "dtype": "float16",
     "masked": True},
    {"name": "very_negative_small", "small": True, "shape": [19, 200], "dim": -1, "dtype": "float32", "shift": -800.0},
    {"name": "fp32_4096x4096_lastdim", "small": False, "shape": [4096, 4096], "dim": -1, "dtype": "float32"},
    {"name": "fp16_4096x16384_dim0_outliers", "small": False, "shape": [4096, 16384], "dim": 0,
     "dtype": "float16", "outliers": True},
    {"name": "bf16_32x2048x1024_middle", "small": False, "shape": [32, 2048, 1024], "dim": 1,
     "dtype": "bfloat16"},
    {"name": "fp32_transposed_8192x4095_lastdim", "small": False, "shape": [8192, 4095], "dim": -1,
     "dtype": "float32", "view": "t"},
    {"name": "fp32_masked_8192x2048", "small": False, "shape": [8192, 2048], "dim": -1, "dtype": "float32",
     "masked": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Normal values with standard deviation 3 (outliers: 0.1% of the normals scaled by 10), plus
    `shift` if given (very negative log-values); a masked case sets 10% of the values and the first 5
    of every slice to -inf."""
    g = torch.Generator(device).manual_seed(seed)
    z = draw(g, case)
    x = 3 * z + case.get("shift", 0.0)
    if case.get("masked"):  # 10% -inf, and the first 5 elements of every slice along dim are -inf
        x = torch.where(torch.rand(z.shape, generator=g, device=g.device) < 0.1, float("-inf"), x)
        d = case["dim"] if case.get("view") != "t" else -1 - case["dim"]
        x.narrow(d, 0, min(5, x.shape[d])).fill_(float("-inf"))
    return (finish(x, case, device),), {"dim": case["dim"]}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 10 * n, "bytes": 2 * n * size}
