"""Merged gate/up projection with SwiGLU epilogue (the first half of a LLaMA MLP, vLLM's
`MergedColumnParallelLinear` + `SiluAndMul` in one kernel).

Implement `linear_swiglu(x, w_gate_up)` for `x` of shape `[M, K]` and a merged weight `[2 * F, K]`
(rows 0..F-1 are the gate projection, rows F..2F-1 the up projection), returning a new tensor
`[M, F]`:

    gate[m, f] = sum over k of x[m, k] * w_gate_up[f, k]          # float32 accumulation
    up[m, f]   = sum over k of x[m, k] * w_gate_up[F + f, k]
    out[m, f]  = silu(gate) * up = gate / (1 + exp(-gate)) * up    # rounded once to the dtype

- `x` and `w_gate_up` share a dtype, float16 or bfloat16, and are contiguous, on the GPU. M, F and
  K are arbitrary (M may be 1).
- The intermediate [M, 2F] projection should never be written to memory. Inputs must not be
  modified.

The result is compared with the reference below (PyTorch's half-precision linear, whose [M, 2F]
result is rounded before the activation) using rtol = atol = 1e-2 for float16 and 3e-2 for
bfloat16 (the reference rounds gate, up, silu(gate) and the product to bfloat16 in turn).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


def linear_swiglu(x: torch.Tensor, w_gate_up: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (half-precision merged linear, then SiLU(gate) * up)."""
    gate, up = torch.nn.functional.linear(x, w_gate_up).chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


CASES = [
    {"name": "square_small", "small": True, "m": 32, "f": 32, "k": 32, "dtype": "float16"},
    {"name": "odd_small", "small": True, "m": 13, "f": 24, "k": 40, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "f": 40, "k": 32, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 136, "f": 70, "k": 100, "dtype": "float16"},
    {"name": "bf16_llama7b_4096x11008x4096", "small": False, "m": 4096, "f": 11008, "k": 4096,
     "dtype": "bfloat16"},
    {"name": "fp16_8192x14336x4096_outliers", "small": False, "m": 8192, "f": 14336, "k": 4096,
     "dtype": "float16", "outliers": True},
    {"name": "fp16_decode_16x13824x5120", "small": False, "m": 16, "f": 13824, "k": 5120, "dtype": "float16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); w_gate_up: normal / sqrt(K)."""
    g = torch.Generator(device).manual_seed(seed)
    m, f, k = case["m"], case["f"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    w = torch.randn(2 * f, k, generator=g, device=g.device) / k ** 0.5
    dtype = getattr(torch, case["dtype"])
    return (x.to(dtype).to(device), w.to(dtype).to(device)), {}


def cost(case: dict) -> dict:
    m, f, k = case["m"], case["f"], case["k"]
    return {"flops": 4 * m * f * k + 4 * m * f, "bytes": 2 * (m * k + 2 * f * k + m * f)}
