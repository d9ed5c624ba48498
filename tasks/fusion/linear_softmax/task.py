"""Mixture-of-experts router: gate projection followed by a float32 softmax over the experts
(Mixtral's `softmax(router_logits, dtype=float)`), in one kernel.

Implement `linear_softmax(x, w_gate)` for tokens `x` `[M, K]` and a router weight `w_gate` `[E, K]`
(E experts, at most 256), returning a new float32 tensor `[M, E]`:

    logits[m, e] = sum over k of x[m, k] * w_gate[e, k]          # float32 accumulation, not rounded
    out[m, :]    = softmax(logits[m, :])                          # in float32

- `x` and `w_gate` share a dtype (float16 or bfloat16) and are contiguous, on the GPU. M and K are
  arbitrary (M may be 1); E is any value from 1 to 256.
- The output is float32. Inputs must not be modified.

The reference computes the logits in float32 from the half-precision inputs. The result is
compared with rtol = 1e-4, atol = 1e-5 (float32), which absorbs float32 accumulation-order
differences over K.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float32": (1e-4, 1e-5)}


def linear_softmax(x: torch.Tensor, w_gate: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 logits and softmax."""
    logits = torch.nn.functional.linear(x.float(), w_gate.float())
    return torch.softmax(logits, dim=-1)


CASES = [
    {"name": "e8_small", "small": True, "m": 32, "e": 8, "k": 32, "dtype": "float16"},
    {"name": "e60_odd_small", "small": True, "m": 13, "e": 60, "k": 40, "dtype": "float16"},
    {"name": "m1_outliers_small", "small": True, "m": 1, "e": 16, "k": 48, "dtype": "float16", "outliers": True},
    {"name": "tiles_small", "small": True, "m": 70, "e": 60, "k": 100, "dtype": "float16"},
    {"name": "fp16_mixtral_16384x8x4096", "small": False, "m": 16384, "e": 8, "k": 4096, "dtype": "float16"},
    {"name": "bf16_deepseek_8192x256x7168", "small": False, "m": 8192, "e": 256, "k": 7168,
     "dtype": "bfloat16"},
    {"name": "fp16_qwen_16384x60x2048_outliers", "small": False, "m": 16384, "e": 60, "k": 2048,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): at most 256 experts by contract.
SHAPES = family(most={"e": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); w_gate: 2 * normal / sqrt(K) (logits of
    standard deviation about 2)."""
    g = torch.Generator(device).manual_seed(seed)
    m, e, k = case["m"], case["e"], case["k"]
    x = normal(g, [m, k], case.get("outliers"))
    w = 2 * torch.randn(e, k, generator=g, device=g.device) / k ** 0.5
    dtype = getattr(torch, case["dtype"])
    return (x.to(dtype).to(device), w.to(dtype).to(device)), {}


def cost(case: dict) -> dict:
    m, e, k = case["m"], case["e"], case["k"]
    return {"flops": 2 * m * e * k + 5 * m * e, "bytes": 2 * (m * k + e * k) + 4 * m * e}
