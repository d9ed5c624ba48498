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
import secrets

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
CHUNK = 1 << 22  # values per step of the streamed pass (even, so no neighbour pair straddles two steps)
WINDOW = 1 << 21  # values per window of the any-lag test and the repeat count
FINE = 20  # the streamed histogram's 2^FINE bins: KS at their edges, every coarser histogram by sums


def _lags(n: int) -> list[int]:
    """Lags 1-8 and every power of two up to n / 16 (kernels repeat at block sizes)."""
    return sorted({k for k in range(1, 9)} | {2 ** j for j in range(4, 40) if 2 ** j <= n // 16})


def _scales(n: int) -> list[int]:
    """log2 of the histogram sizes tested: 32, 64, ... bins, >= 16 expected per bin, at most 2^FINE."""
    return [j for j in range(5, FINE + 1) if 16 * 2 ** j <= n]


def _grid(n: int) -> int:
    """Side of the neighbour-pair grid: k <= 256, >= 16 expected per cell."""
    return max(2, min(256, int((n // 2 / 16) ** 0.5)))


def _serial_from(sums: torch.Tensor, n: int, lags: list[int]) -> torch.Tensor:
    """z of the lag-k autocovariance about the known mean 1/2 from sum_t c[t] c[t + k] ([rows, lags]):
    the terms have mean 0, variance 1/144 and are uncorrelated under independence."""
    return sums / torch.tensor([((n - k) / 144) ** 0.5 for k in lags], dtype=sums.dtype, device=sums.device)


def serial_z(x: torch.Tensor, lags: list[int]) -> torch.Tensor:
    """Per row of x ([rows, n], float64), the serial-correlation z at each lag. -> [rows, lags]"""
    c = x - 0.5
    return _serial_from(torch.stack([(c[:, :-k] * c[:, k:]).sum(1) for k in lags], 1), x.shape[1], lags)


def _changes(x: torch.Tensor) -> torch.Tensor:
    high = x >= 0.5
    return (high[:, 1:] != high[:, :-1]).sum(1).double()


def _turns(x: torch.Tensor) -> torch.Tensor:
    mid, left, right = x[:, 1:-1], x[:, :-2], x[:, 2:]
    return (((mid > left) & (mid > right)) | ((mid < left) & (mid < right))).sum(1).double()


def _runs_from(changes: torch.Tensor, turns: torch.Tensor, n: int) -> torch.Tensor:
    """z of the number of runs above/below 1/2 (the changes are exactly Binomial(n - 1, 1/2)) and of
    the number of turning points (mean 2 (n - 2) / 3, variance (16 n - 29) / 90). -> [rows, 2]"""
    return torch.stack([(changes - (n - 1) / 2) / ((n - 1) / 4) ** 0.5,
                        (turns - 2 * (n - 2) / 3) / ((16 * n - 29) / 90) ** 0.5], -1)


def runs_z(x: torch.Tensor) -> torch.Tensor:
    return _runs_from(_changes(x), _turns(x), x.shape[1])


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


def _pair_cells(x: torch.Tensor, k: int) -> torch.Tensor:
    """Cell of each neighbour pair (x[2i], x[2i + 1]) on the k x k grid (x: [rows, even length])."""
    cell = (x * k).long().clamp_(0, k - 1).reshape(x.shape[0], -1, 2)
    return cell[..., 0] * k + cell[..., 1]


def _uniformity_from(fine: torch.Tensor, cells: torch.Tensor, n: int) -> torch.Tensor:
    """Histogram z at each of _scales(n), summed from `fine` ([rows, 2^f] counts, f >= every scale),
    and the neighbour pairs' z from their grid counts ([rows, k^2]). -> [rows, scales + 1]"""
    rows, bins = fine.shape
    zs = [_chi2_z(fine.reshape(rows, 2 ** j, bins >> j).sum(2), 2 ** j) for j in _scales(n)]
    return torch.stack(zs + [_chi2_z(cells, cells.shape[1])], 1)


def uniformity_z(x: torch.Tensor) -> torch.Tensor:
    """Per row of x ([rows, n]), the chi-square z of the histogram at 32, 64, ... bins and of the
    neighbour pairs. -> [rows, scales + 1]"""
    n, f, k = x.shape[1], max([5] + _scales(x.shape[1])), _grid(x.shape[1])
    fine = _histogram((x * 2 ** f).long().clamp_(0, 2 ** f - 1), 2 ** f)
    return _uniformity_from(fine, _histogram(_pair_cells(x[:, :n // 2 * 2], k), k * k), n)


def stream(u: torch.Tensor) -> dict | str:
    """One pass over u in steps of CHUNK values, so that the extra memory is bounded whatever n:
    the sum of x - 1/2, the 2^FINE-bin histogram, the neighbour-pair grid, the lag products
    sum_t c[t] c[t + k], the runs' changes and the turning points; a reason if a value is outside [0, 1)."""
    n, dev = u.numel(), u.device
    lags, k = _lags(n), _grid(n)
    fine = torch.zeros(2 ** FINE, dtype=torch.int64, device=dev)
    cells = torch.zeros(k * k, dtype=torch.int64, device=dev)
    sums = torch.zeros(len(lags), dtype=torch.float64, device=dev)
    total, changes, turns = (torch.zeros((), dtype=torch.float64, device=dev) for _ in range(3))
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        x = u[a:b]
        if not bool((torch.isfinite(x) & (x >= 0) & (x < 1)).all()):
            return "values outside [0, 1)"
        c = u[a:min(n, b + CHUNK)].double() - 0.5  # the step and, for lags up to CHUNK, what follows it
        total += c[:b - a].sum()
        fine += torch.bincount((x * 2 ** FINE).long(), minlength=2 ** FINE)
        cells += torch.bincount(_pair_cells(x[None, :(b - a) // 2 * 2], k)[0], minlength=k * k)
        for j, lag in enumerate(lags):
            m = min(b, n - lag) - a
            if m > 0:
                after = c[lag:lag + m] if lag <= CHUNK else u[a + lag:a + lag + m].double() - 0.5
                sums[j] += torch.dot(c[:m], after)
        changes += _changes(u[None, a:min(b + 1, n)])[0]
        turns += _turns(u[None, max(a - 1, 0):min(b + 1, n)])[0]
    return {"n": n, "total": total, "fine": fine, "cells": cells, "sums": sums, "changes": changes, "turns": turns}


def windows(u: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The parts of u that the any-lag test and the repeat count see, each of at most WINDOW values:
    u itself if it fits; else its first and its last WINDOW values, its first and last WINDOW / 2
    joined (a tail copying the head), WINDOW values at a random offset, and every s-th value from a
    random phase, s = ceil(n / WINDOW) (structure spanning the whole output). The offsets come from
    `secrets`, drawn in the judging process at each check, so a candidate cannot know them."""
    n, w = u.numel(), WINDOW
    if n <= w:
        return [("", u)]
    s = -(-n // w)
    o, r = secrets.randbelow(n - w + 1), secrets.randbelow(s)
    return [(f"values 0..{w - 1}", u[:w]), (f"values {n - w}..{n - 1}", u[n - w:]),
            (f"values 0..{w // 2 - 1} and {n - w // 2}..{n - 1}", torch.cat([u[:w // 2], u[n - w // 2:]])),
            (f"values {o}..{o + w - 1}", u[o:o + w]), (f"every {s}th value from {r}", u[r::s])]


def any_lag_t(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Dependence between x[i] and x[i + L] at every lag L up to max(n / 2, n - 256), through three
    features: x - 1/2 (linear), and e^(2 pi i x) against itself and against its conjugate (so a
    copy shifted by any constant mod 1, or mirrored as 1 - x, shows as strongly as a plain copy).
    All by FFT, in float64 up to 2^22 values and float32 beyond, where the rounding error is far
    below the noise (about 100 bytes per value at peak, so it runs on windows of at most WINDOW
    values). Each value has a tail P(T > t) <= e^-t under independence. -> [rows, 3, lags]"""
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


def any_lag_limit(n: int, count: int = 1) -> float:
    """-ln of 1e-6 shared over the 3 x lags values of any_lag_t, on each of `count` windows."""
    return math.log(3 * max(n // 2, n - 256) * count / 1e-6)


def _any_lag(views: list[tuple[str, torch.Tensor]]) -> str | None:
    for name, w in views:
        m, limit = w.numel(), any_lag_limit(w.numel(), len(views))
        t = any_lag_t(w[None])[0].flatten()
        worst = int(t.argmax())
        if float(t[worst]) > limit:
            kind = ["linearly", "as a shifted copy", "as a mirrored copy"][worst // (t.numel() // 3)]
            where = f" within {name}" if name else ""
            return (f"x[i + {worst % (t.numel() // 3) + 1}] depends on x[i] {kind}{where}: z = "
                    f"{(2 * float(t[worst])) ** 0.5:.1f} (limit {(2 * limit) ** 0.5:.1f}): samples are not "
                    "independent uniforms")
        del t
    return None


def independence(u: torch.Tensor, stats: dict | None = None,
                 views: list[tuple[str, torch.Tensor]] | None = None) -> str | None:
    """The first independence statistic beyond its threshold, named, or None (u: 1-D, n >= MIN_N,
    values in [0, 1)). The any-lag test runs on `windows(u)`; the rest on the streamed pass."""
    st = stats if stats is not None else stream(u)
    assert isinstance(st, dict), st
    n, lags = u.numel(), _lags(u.numel())
    found = _any_lag(views if views is not None else windows(u))
    if found:
        return found
    families = (
        (_serial_from(st["sums"][None], n, lags)[0], Z_FAMILY, [f"serial correlation at lag {k}" for k in lags],
         "negative"),
        (_runs_from(st["changes"], st["turns"], n), Z_ONE, ["runs above/below 0.5", "turning points"], "too few"),
        (_uniformity_from(st["fine"][None].double(), st["cells"][None].double(), n)[0], Z_FAMILY,
         [f"histogram at {2 ** j} bins" for j in _scales(n)] + ["neighbour pairs"], "too even"),
    )
    for z, limit, names, low in families:
        worst = int(z.abs().argmax())
        value = float(z[worst])
        if abs(value) > limit:
            sense = low if value < 0 else {"negative": "positive", "too few": "too many"}.get(low, "too lumpy")
            return f"{names[worst]}: z = {value:.1f} ({sense}; limit {limit}): samples are not independent uniforms"
    return None


def check(out: list, ref: list, case: dict) -> str | None:
    """Distribution check on the single output (`ref` only supplies the expected shape/dtype), in
    memory bounded independently of n: the streamed pass over the whole output, then windows."""
    (u,), (r,) = out, ref
    if u.dtype != r.dtype or u.shape != r.shape:
        return f"expected {r.dtype} {tuple(r.shape)}, got {u.dtype} {tuple(u.shape)}"
    u = u.reshape(-1)
    n, st = u.numel(), stream(u)
    if isinstance(st, str):
        return st
    edges = torch.arange(1, 2 ** FINE + 1, dtype=torch.float64, device=u.device) / 2 ** FINE
    d = float((torch.cumsum(st["fine"], 0).double() / n - edges).abs().max())  # KS at the bin edges: <= exact KS
    if d >= 2.7 / n ** 0.5:
        return f"KS distance {d:.3g} >= {2.7 / n ** 0.5:.3g}"
    mean = 0.5 + float(st["total"]) / n
    z = abs(mean - 0.5) / (1 / (12 * n)) ** 0.5
    if z > 5:
        return f"mean {mean:.6f} is {z:.1f} standard errors from 0.5"
    views = windows(u)
    for name, w in views:
        m, s = w.numel(), torch.sort(w).values
        repeats = int((s[1:] == s[:-1]).sum())
        if repeats > 8 * m * m / 2 ** 24 + 16:  # birthday bound at 23 bits, 32x margin
            return f"{repeats} repeated values among {m}{' in ' + name if name else ''}: samples are not independent"
        del s
    return independence(u, st, views) if n >= MIN_N else None
