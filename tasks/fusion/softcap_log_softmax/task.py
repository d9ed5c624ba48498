"""Logit soft-capping followed by log-softmax over a large vocabulary (Gemma-2's final-logit
soft-cap, then the log-probabilities used for sampling and scoring).

Implement `softcap_log_softmax(logits, cap)` for `logits` of shape `[M, V]` and a Python float
`cap > 0`, returning a new float32 tensor of shape `[M, V]`:

    z = cap * tanh(logits / cap)                      # float32
    out[m, :] = z[m, :] - log(sum over v of exp(z[m, v]))

- `logits` is contiguous with dtype float32 or bfloat16, on the GPU. V is large and arbitrary
  (up to a few hundred thousand; not a power of two), so a row does not fit in registers.
- The output is float32 whatever the input dtype. Inputs must not be modified.

The result is compared with the reference below using the float32 tolerance rtol = atol = 1e-5
(values are of order -10, so the relative part dominates).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def softcap_log_softmax(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """PyTorch reference, in float32."""
    z = cap * torch.tanh(logits.float() / cap)
    return torch.log_softmax(z, dim=-1)


CASES = [
    {"name": "fp32_small", "small": True, "m": 3, "v": 1000, "cap": 30.0, "dtype": "float32"},
    {"name": "bf16_small", "small": True, "m": 2, "v": 2500, "cap": 30.0, "dtype": "bfloat16"},
    {"name": "fp32_outliers_small", "small": True, "m": 4, "v": 700, "cap": 10.0, "dtype": "float32",
     "outliers": True},
    {"name": "m1_small", "small": True, "m": 1, "v": 3001, "cap": 50.0, "dtype": "float32"},
    {"name": "bf16_1024x256000", "small": False, "m": 1024, "v": 256000, "cap": 30.0, "dtype": "bfloat16"},
    {"name": "fp32_4096x32000_outliers", "small": False, "m": 4096, "v": 32000, "cap": 30.0,
     "dtype": "float32", "outliers": True},
    {"name": "bf16_2048x128256", "small": False, "m": 2048, "v": 128256, "cap": 50.0, "dtype": "bfloat16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """logits: 8 * standard normal plus a per-row offset (outliers: 0.1% scaled by 10), so that the
    cap matters for the largest logits."""
    g = torch.Generator(device).manual_seed(seed)
    m, v = case["m"], case["v"]
    x = normal(g, [m, v], case.get("outliers"), 8)
    x = x + 4 * torch.randn(m, 1, generator=g, device=g.device)
    return (x.to(getattr(torch, case["dtype"])).to(device), case["cap"]), {}


def cost(case: dict) -> dict:
    m, v = case["m"], case["v"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 8 * m * v, "bytes": m * v * (size + 4)}
