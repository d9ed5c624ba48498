"""GeGLU gating: exact GELU of the gate times the up projection (T5 v1.1 / Gemma-style MLP).

Implement `geglu(gate, up)`: return a new tensor

    out = gelu(gate) * up,   gelu(g) = 0.5 * g * (1 + erf(g / sqrt(2)))     # exact GELU

computed in float32 and rounded once to the input dtype.

- `gate` and `up` have the same shape `[..., N]` and dtype (float32, float16 or bfloat16), on the
  GPU. Their last dimension is contiguous, but rows need not be adjacent: typically both are
  column slices of one fused `[M, 2N]` projection output (`h[:, :N]` and `h[:, N:]`).
- Return a new (contiguous) tensor of the same shape and dtype. Inputs must not be modified.
- The tanh approximation of GELU is not accurate enough for float32.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    return (torch.nn.functional.gelu(gate.float()) * up.float()).to(gate.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_fused_small", "small": True, "shape": [12, 160], "dtype": "float16", "fused": True},
    {"name": "bf16_outliers_small", "small": True, "shape": [2, 4, 300], "dtype": "bfloat16", "outliers": True},
    {"name": "n1_fused_small", "small": True, "shape": [6, 1], "dtype": "float32", "fused": True},
    {"name": "programs_small", "small": True, "shape": [3, 2100], "dtype": "float32"},
    {"name": "gate_fused_small", "small": True, "shape": [10, 96], "dtype": "float32", "fused": "gate"},
    {"name": "bf16_fused_4096x16384", "small": False, "shape": [4096, 16384], "dtype": "bfloat16", "fused": True},
    {"name": "fp16_8x1024x6144_outliers", "small": False, "shape": [8, 1024, 6144], "dtype": "float16",
     "outliers": True},
    {"name": "fp32_fused_4100x5120", "small": False, "shape": [4100, 5120], "dtype": "float32", "fused": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """gate: 1.5 * standard normal (outliers: 0.1% scaled by 10); up: standard normal. With
    `fused`, both are the two column halves of one contiguous [M, 2N] tensor (`fused: "gate"`: up
    is then copied to a contiguous tensor, so the two row strides differ)."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    n = shape[-1]
    dtype = getattr(torch, case["dtype"])
    gate = normal(g, shape, case.get("outliers"), 1.5)
    up = torch.randn(shape, generator=g, device=g.device)
    if case.get("fused"):
        h = torch.cat([gate, up], dim=-1).to(dtype).to(device)
        gate, up = h[..., :n], h[..., n:]
        return (gate, up.contiguous() if case["fused"] == "gate" else up), {}
    return (gate.to(dtype).to(device), up.to(dtype).to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 10 * n, "bytes": 3 * n * size}
