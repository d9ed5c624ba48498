"""Logarithmically spaced values.

Implement `logspace(start, end, steps, base=10.0, device="cpu")`: return a new 1-D float32 tensor
of `steps` values created on `device` (the harness passes the device it runs on, e.g. "cuda"):

    y[i] = base ** (start + i * (end - start) / (steps - 1)),   i = 0, ..., steps - 1

so y[0] = base ** start and y[steps - 1] = base ** end (steps == 1 gives [base ** start]), as
`torch.logspace(start, end, steps, base=base)`.

- `start` and `end` are Python floats (end < start gives a decreasing sequence), `steps >= 1` a
  Python int, `base > 0` a Python float. Values span up to twenty orders of magnitude.
- Relative accuracy is what matters: an exponent computed in float32 as start + i * step can be off
  by ~1e-6 absolute, which base ** (.) turns into a relative error of ln(base) * 1e-6 per unit of
  exponent magnitude; keep the total relative error well below 1e-5.

Deterministic (not random; it is the study's Random-category companion of rand). The result is
compared with the PyTorch call above: shape [steps] and dtype float32 exactly, values with the float32
default tolerance (rtol = atol = 1e-5).
"""
import math

import torch

from kbx_ray.taskkit import family

CATEGORY = "Random"
LEVEL = 2


def logspace(start: float, end: float, steps: int, base: float = 10.0, device: str = "cpu") -> torch.Tensor:
    """PyTorch reference."""
    return torch.logspace(start, end, steps, base=base, device=device)


CASES = [
    {"name": "decades_small", "small": True, "start": 0.0, "end": 3.0, "steps": 50, "base": 10.0},
    {"name": "wide_odd_small", "small": True, "start": -10.0, "end": 10.0, "steps": 4097, "base": 10.0},
    {"name": "decreasing_small", "small": True, "start": 2.0, "end": -2.0, "steps": 1001, "base": 10.0},
    {"name": "base_e_small", "small": True, "start": 0.0, "end": 20.0, "steps": 3000, "base": 2.718281828459045},
    {"name": "base2_small", "small": True, "start": -20.0, "end": 40.0, "steps": 2001, "base": 2.0},
    {"name": "fractional_base_small", "small": True, "start": -3.5, "end": 12.25, "steps": 777, "base": 0.5},
    {"name": "steps1_small", "small": True, "start": 1.5, "end": 7.0, "steps": 1, "base": 10.0},
    {"name": "steps2_small", "small": True, "start": -1.0, "end": 1.0, "steps": 2, "base": 10.0},
    {"name": "wide_16M", "small": False, "start": -10.0, "end": 10.0, "steps": 16777216, "base": 10.0},
    {"name": "base2_10M_odd", "small": False, "start": -20.0, "end": 40.0, "steps": 10000019, "base": 2.0},
    {"name": "base3_32M", "small": False, "start": 0.0, "end": 5.0, "steps": 33554432, "base": 3.0},
]


def _arguments(rng, case: dict) -> dict:
    """An unseen case's start, end and base (drawn secretly per evaluation): a base in [1.5, 10] or
    its inverse, and endpoints whose values lie between 1e-10 and 1e10, the larger at least 10
    (values far below the tolerance's atol would judge nothing)."""
    base = rng.uniform(1.5, 10.0)
    base = 1.0 / base if rng.random() < 0.5 else base
    lo, hi = rng.uniform(-10.0, 10.0), rng.uniform(1.0, 10.0)  # decades of the two ends
    first, last = (lo, hi) if rng.random() < 0.5 else (hi, lo)
    return {"start": first / math.log10(base), "end": last / math.log10(base), "base": base}


SHAPES = family(values=_arguments)


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """No tensors: the case's start, end, steps and base, and the device (the seed is unused)."""
    return (case["start"], case["end"], case["steps"]), {"base": case["base"], "device": str(device)}


def cost(case: dict) -> dict:
    return {"flops": 4 * case["steps"], "bytes": 4 * case["steps"]}
