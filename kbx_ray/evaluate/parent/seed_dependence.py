"""Two outputs of a random task, drawn under different seeds -> why they are not independent.

Random tasks are judged by distribution (their own `check`), which a generator that ignores its seed
at most positions can pass; this cross-seed test fails it (`case_checks` runs it on every random
task's outputs under two seeds).
"""
from __future__ import annotations

import torch


def seed_dependence(a: torch.Tensor, b: torch.Tensor, limit: int = 1 << 20) -> str:
    """Why two outputs of a random task, drawn under different seeds, are not independent ('' when
    nothing shows): the share of positions holding the same value, against the share that two
    independent draws with these value frequencies would give (about 0 for continuous values,
    about 1/2 for a dropout mask). A generator that ignores its seed at most positions (a position
    hash that changes one element per seed) fails, where an all-equal test would pass it."""
    x, y = a.flatten()[:limit], b.flatten()[:limit]
    n = min(x.numel(), y.numel())
    if n < 64 or x.dtype != y.dtype:
        return ""
    x, y = x[:n], y[:n]
    same = x == y
    if x.is_floating_point():
        same |= x.isnan() & y.isnan()
    frac = float(same.double().mean())
    va, ca = torch.unique(x, return_counts=True)
    vb, cb = torch.unique(y, return_counts=True)
    vals, inv = torch.unique(torch.cat([va, vb]), return_inverse=True)
    pa = torch.zeros(len(vals), dtype=torch.float64, device=x.device).index_add_(
        0, inv[:len(va)], ca.double() / n)
    pb = torch.zeros(len(vals), dtype=torch.float64, device=x.device).index_add_(
        0, inv[len(va):], cb.double() / n)
    expected = float((pa * pb).sum())
    bound = expected + 8 * (expected * (1 - expected) / n) ** 0.5 + 8 / n
    if frac > bound:
        return (f"{frac:.1%} of positions hold the same value under two seeds; independent draws "
                f"would match at about {expected:.2%} (the output ignores its seed)")
    # values that differ everywhere but move together (the same stream nudged by the seed)
    fx, fy = x.double(), y.double()
    ok = fx.isfinite() & fy.isfinite()
    fx, fy = fx[ok] - fx[ok].mean(), fy[ok] - fy[ok].mean()
    den = float(fx.norm() * fy.norm())
    r = float((fx * fy).sum()) / den if den > 0 else 0.0
    if abs(r) > 8 / max(int(ok.sum()), 1) ** 0.5:
        return (f"outputs under two seeds are correlated position by position (r = {r:.3f}; "
                "independent draws give about 0): the output barely depends on its seed")
    return ""
