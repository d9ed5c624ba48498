"""Uniform random numbers.

Implement `rand(n, seed, device="cpu")`: return a new 1-D float32 tensor of `n` independent
samples from the uniform distribution on [0, 1), created on `device` (the harness passes the
device it runs on, e.g. "cuda").

- The output must be a deterministic function of (n, seed): the same arguments give bit-identical
  results, and a different seed gives different numbers. It does not have to reproduce
  `torch.rand`'s stream; any good counter-based generator (e.g. Philox) seeded with `seed` is fine.
- n >= 1; seed is a non-negative integer below 2**31.

Checked by `check` (every threshold is set so that a good generator fails it less than once in a
million draws): dtype float32, shape [n], every value in [0, 1), the Kolmogorov-Smirnov distance to
U(0, 1) below 2.7 / sqrt(n), the mean within 5 standard errors of 0.5, and no more repeated values
than chance gives at 23-bit resolution (at most 8 n^2 / 2^24 + 16). The samples must also be
independent of their positions and of each other (n >= 256): no serial correlation at lags 1-8
and at every power of two up to n / 16; no dependence between x[i] and x[i + L] at any lag L
(linear, or as a copy shifted mod 1 or mirrored, so no two parts of the output may come from the
same counters); the runs above and below 0.5 and the turning points
(local maxima and minima) as many as chance gives; pairs of neighbours (x[2i], x[2i+1]) spread
over the unit square like independent points; and the histogram at 32, 64, ... bins neither too
lumpy nor too even (a stratified or low-discrepancy sequence is not a random one). The harness
additionally checks determinism per seed and that seeds matter.
"""
import math

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


Z_ONE, Z_FAMILY = 5.0, 5.6  # two-sided normal tails: 5.7e-7 for one statistic, 2.1e-8 for each of a family
MIN_N = 256  # below it, the independence checks have too little data (the range check still runs)


def _lags(n: int) -> list[int]:
    """Lags 1-8 and every power of two up to n / 16 (kernels repeat at block sizes)."""
    return sorted({k for k in range(1, 9)} | {2 ** j for j in range(4, 40) if 2 ** j <= n // 16})


def serial_z(x: torch.Tensor, lags: list[int]) -> torch.Tensor:
    """Per row of x ([rows, n], float64), z of the lag-k autocovariance about the known mean 1/2:
    the terms have mean 0, variance 1/144 and are uncorrelated under independence. -> [rows, lags]"""
    c = x - 0.5
    return torch.stack([(c[:, :-k] * c[:, k:]).sum(1) / ((x.shape[1] - k) / 144) ** 0.5 for k in lags], 1)


def runs_z(x: torch.Tensor) -> torch.Tensor:
    """z of the number of runs above/below 1/2 (the changes are exactly Binomial(n - 1, 1/2)) and of
    the number of turning points (mean 2 (n - 2) / 3, variance (16 n - 29) / 90). -> [rows, 2]"""
    n = x.shape[1]
    high = x >= 0.5
    changes = (high[:, 1:] != high[:, :-1]).sum(1).double()
    mid, left, right = x[:, 1:-1], x[:, :-2], x[:, 2:]
    turns = (((mid > left) & (mid > right)) | ((mid < left) & (mid < right))).sum(1).double()
    return torch.stack([(changes - (n - 1) / 2) / ((n - 1) / 4) ** 0.5,
                        (turns - 2 * (n - 2) / 3) / ((16 * n - 29) / 90) ** 0.5], 1)


def _chi2_z(counts: torch.Tensor, cells: int) -> torch.Tensor:
    """Pearson chi-square of equiprobable counts ([rows, cells]) as a normal z (Wilson-Hilferty)."""
    expected = counts.sum(1, keepdim=True) / cells
    chi2 = ((counts - expected) ** 2 / expected).sum(1)
    d = cells - 1
    return ((chi2 / d) ** (1 / 3) - (1 - 2 / (9 * d))) / (2 / (9 * d)) ** 0.5


def _histogram(idx: torch.Tensor, cells: int) -> torch.Tensor:
    rows = idx.shape[0]
    flat = idx + cells * torch.arange(rows, device=idx.device)[:, None]
    return torch.bincount(flat.reshape(-1), minlength=rows * cells).reshape(rows, cells).double()


def uniformity_z(x: torch.Tensor) -> torch.Tensor:
    """z of the histogram's chi-square at 32, 64, ... bins (>= 16 expected per bin) and of the
    neighbour pairs' chi-square on a k x k grid (k <= 256, >= 16 expected per cell). -> [rows, scales + 1]"""
    n = x.shape[1]
    zs = []
    for j in range(5, 40):
        if 2 ** j * 16 > n:
            break
        zs.append(_chi2_z(_histogram((x * 2 ** j).long().clamp_(0, 2 ** j - 1), 2 ** j), 2 ** j))
    pairs = n // 2
    k = max(2, min(256, int((pairs / 16) ** 0.5)))
    cell = (x[:, :2 * pairs] * k).long().clamp_(0, k - 1).reshape(x.shape[0], pairs, 2)
    zs.append(_chi2_z(_histogram(cell[..., 0] * k + cell[..., 1], k * k), k * k))
    return torch.stack(zs, 1)


def any_lag_t(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Dependence between x[i] and x[i + L] at every lag L up to max(n / 2, n - 256), through three
    features: x - 1/2 (linear), and e^(2 pi i x) against itself and against its conjugate (so a
    copy shifted by any constant mod 1, or mirrored as 1 - x, shows as strongly as a plain copy).
    All by FFT, in float64 up to 2^22 values and float32 beyond, where the rounding error is far
    below the noise (measured on the CPU: 112 bytes per value at peak for the whole check, so
    about 7 GB for 64M values). Each value has a tail P(T > t) <= e^-t under independence.
    -> [rows, 3, lags]"""
    rows, n = x.shape
    hi = max(n // 2, n - 256)
    m = 1 << (2 * n - 1).bit_length()  # zero padding: no wrap-around
    x = x.to(dtype or (torch.float64 if n <= 1 << 22 else torch.float32))
    terms = n - torch.arange(1, hi + 1, device=x.device, dtype=x.dtype)
    f = torch.fft.rfft(x - 0.5, m)
    linear = torch.fft.irfft(f.real ** 2 + f.imag ** 2, m)[:, 1:hi + 1]  # sum_t c[t] c[t + L]
    del f
    w = torch.polar(torch.ones_like(x), 2 * math.pi * x)
    g = torch.fft.fft(w, m)
    same = torch.fft.ifft(g.real ** 2 + g.imag ** 2)[:, 1:hi + 1].abs()  # |sum_t conj(w[t]) w[t + L]|
    g *= torch.fft.fft(w.conj(), m).conj()
    del w
    mirror = torch.fft.ifft(g)[:, 1:hi + 1].abs()  # |sum_t w[t] w[t + L]|
    return torch.stack([72 * linear ** 2 / terms, same ** 2 / terms, mirror ** 2 / terms], 1)


def any_lag_limit(n: int) -> float:
    """-ln of 1e-6 shared over the 3 x lags values of any_lag_t."""
    return math.log(3 * max(n // 2, n - 256) / 1e-6)


def independence(u: torch.Tensor) -> str | None:
    """The first independence statistic beyond its threshold, named, or None (u: 1-D, n >= MIN_N)."""
    x, n = u.double()[None], u.numel()
    scales = [2 ** j for j in range(5, 40) if 2 ** j * 16 <= n]
    families = (
        (serial_z(x, _lags(n))[0], Z_FAMILY, [f"serial correlation at lag {k}" for k in _lags(n)], "negative"),
        (runs_z(x)[0], Z_ONE, ["runs above/below 0.5", "turning points"], "too few"),
        (uniformity_z(x)[0], Z_FAMILY, [f"histogram at {b} bins" for b in scales] + ["neighbour pairs"],
         "too even"),
    )
    t = any_lag_t(x)[0]
    worst = int(t.flatten().argmax())
    if float(t.flatten()[worst]) > any_lag_limit(n):
        kind = ["linearly", "as a shifted copy", "as a mirrored copy"][worst // t.shape[1]]
        z = (2 * float(t.flatten()[worst])) ** 0.5
        return (f"x[i + {worst % t.shape[1] + 1}] depends on x[i] {kind}: z = {z:.1f} (limit "
                f"{(2 * any_lag_limit(n)) ** 0.5:.1f}): samples are not independent uniforms")
    for z, limit, names, low in families:
        worst = int(z.abs().argmax())
        value = float(z[worst])
        if abs(value) > limit:
            sense = low if value < 0 else {"negative": "positive", "too few": "too many"}.get(low, "too lumpy")
            return f"{names[worst]}: z = {value:.1f} ({sense}; limit {limit}): samples are not independent uniforms"
    return None


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
    if d >= 2.7 / n ** 0.5:
        return f"KS distance {d:.3g} >= {2.7 / n ** 0.5:.3g}"
    z = abs(s.mean().item() - 0.5) / (1 / (12 * n)) ** 0.5
    if z > 5:
        return f"mean {s.mean().item():.6f} is {z:.1f} standard errors from 0.5"
    repeats = int((s[1:] == s[:-1]).sum().item())
    if repeats > 8 * n * n / 2 ** 24 + 16:  # birthday bound at 23 bits, 32x margin
        return f"{repeats} repeated values among {n}: samples are not independent"
    return independence(u) if n >= MIN_N else None
