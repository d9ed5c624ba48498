"""Uniform random numbers.

Implement `rand(n, seed, device="cpu")`: return a new 1-D float32 tensor of `n` independent
samples from the uniform distribution on [0, 1), created on `device` (the harness passes the
device it runs on, e.g. "cuda").

- The output must be a deterministic function of (n, seed): the same arguments give bit-identical
  results, and a different seed gives different numbers. It does not have to reproduce
  `torch.rand`'s stream; any good counter-based generator (e.g. Philox) seeded with `seed` is fine.
- n >= 1; seed is a non-negative integer below 2**31.

Checked by `check`: dtype float32, shape [n], every value in [0, 1), the Kolmogorov-Smirnov
distance to U(0, 1) below 2.23 / sqrt(n) (the critical value at significance 1e-4, so a correct
generator fails about once in 10,000 draws), the mean within 5 standard errors of 0.5, and no more
repeated values than chance gives at 23-bit resolution (at most 8 n^2 / 2^24 + 16: samples must be
independent, so no two parts of the output may come from the same counters). The harness
additionally checks determinism per seed and that seeds matter.
"""
import torch

CATEGORY = "Random"
LEVEL = 2
RANDOM = True


def rand(n: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """PyTorch reference: torch.rand with a generator seeded by `seed` on `device`."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(n, generator=g, device=device)


CASES = [
    {"name": "n1000_small", "small": True, "n": 1000},
    {"name": "n1_small", "small": True, "n": 1},
    {"name": "n4097_small", "small": True, "n": 4097},
    {"name": "n20011_small", "small": True, "n": 20011},
    {"name": "n16M", "small": False, "n": 16777216},
    {"name": "n10M_odd", "small": False, "n": 10000019},
    {"name": "n64M", "small": False, "n": 67108864},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """No tensors: the sample count, a seed in [0, 2**31) derived from the harness seed, and the
    device."""
    return (case["n"], (1000 * seed + 12345) % (2**31 - 1)), {"device": str(device)}


def cost(case: dict) -> dict:
    return {"flops": case["n"], "bytes": 4 * case["n"]}


def check(out: list, ref: list, case: dict) -> str | None:
    """Distribution check on the single output (`ref` only supplies the expected shape/dtype)."""
    (u,), (r,) = out, ref
    if u.dtype != r.dtype or u.shape != r.shape:
        return f"expected {r.dtype} {tuple(r.shape)}, got {u.dtype} {tuple(u.shape)}"
    n = u.numel()
    if not torch.isfinite(u).all() or (u < 0).any() or (u >= 1).any():
        return "values outside [0, 1)"
    s = torch.sort(u.double()).values
    i = torch.arange(n, dtype=torch.float64, device=u.device)
    d = torch.maximum((i + 1) / n - s, s - i / n).max().item()  # KS statistic vs U(0, 1)
    if d >= 2.23 / n ** 0.5:
        return f"KS distance {d:.3g} >= {2.23 / n ** 0.5:.3g}"
    z = abs(s.mean().item() - 0.5) / (1 / (12 * n)) ** 0.5
    if z > 5:
        return f"mean {s.mean().item():.6f} is {z:.1f} standard errors from 0.5"
    repeats = int((s[1:] == s[:-1]).sum().item())
    if repeats > 8 * n * n / 2 ** 24 + 16:  # birthday bound at 23 bits, 32x margin
        return f"{repeats} repeated values among {n}: samples are not independent"
    return None
