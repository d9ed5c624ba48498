"""Evaluation rows -> the study's headline numbers, kept as running tallies for live dashboards.

One cell can have several evaluation rows (a repair cell records every round); the cell's answer is
the row marked `final`. Rates are therefore over final rows, one per cell, which is what the study's
tables report. A row whose `final` is None counts as final, so that a method with one row per cell
need not set it; only `final=False` rows (intermediate rounds) are left out.

The definitions follow KernelBench: fast_p is the fraction of cells whose kernel is correct AND
faster than the eager reference by more than p, over all cells (failures count in the denominator).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

FAST_P = (1.0, 1.5, 2.0)
GROUP_DIMS = ("method", "model", "hardware", "category")


def is_final(row: dict) -> bool:
    return row.get("final") is not False


def fast_key(p: float) -> str:
    """fast_1, fast_1p5, fast_2: W&B reads '.' in a key as nesting, so it is spelled 'p'."""
    return "fast_" + f"{p:g}".replace(".", "p")


def key_part(value: object) -> str:
    """A group value as one W&B key segment: '/' would open a new panel section."""
    return str(value if value not in (None, "") else "unknown").replace("/", "_")


def geomean(values: list[float]) -> float:
    """Geometric mean of the positive values; NaN when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


@dataclass
class Tally:
    """Counts for one group; cheap to update per row and to turn into rates at any time."""

    cells: int = 0
    call_ok: int = 0
    exec_ok: int = 0
    fast: dict[float, int] = field(default_factory=lambda: {p: 0 for p in FAST_P})
    log_speedup_sum: float = 0.0
    n_speedup: int = 0
    sol_sum: float = 0.0
    n_sol: int = 0

    def add(self, row: dict) -> None:
        self.cells += 1
        self.call_ok += bool(row.get("call_ok"))
        ok = bool(row.get("exec_ok"))
        self.exec_ok += ok
        speedup, sol = row.get("speedup"), row.get("sol_fraction")
        if ok and speedup is not None and speedup > 0 and math.isfinite(speedup):
            self.log_speedup_sum += math.log(speedup)
            self.n_speedup += 1
            for p in FAST_P:
                self.fast[p] += speedup > p
        if ok and sol is not None and math.isfinite(sol):
            self.sol_sum += sol
            self.n_sol += 1

    def metrics(self) -> dict[str, float]:
        n = max(self.cells, 1)
        out = {"cells": float(self.cells), "call_rate": self.call_ok / n,
               "exec_rate": self.exec_ok / n}
        out.update({fast_key(p): self.fast[p] / n for p in FAST_P})
        if self.n_speedup:
            out["geomean_speedup"] = math.exp(self.log_speedup_sum / self.n_speedup)
        if self.n_sol:
            out["mean_sol_fraction"] = self.sol_sum / self.n_sol
        return out


class RunningMetrics:
    """Tallies per (dimension, value) plus one overall tally, fed batch by batch."""

    def __init__(self, dims: tuple[str, ...] = GROUP_DIMS) -> None:
        self.dims = dims
        self.tallies: dict[tuple[str, str], Tally] = {}

    def update(self, rows: list[dict]) -> dict[str, float]:
        """Add the batch's final rows; return the metrics of every group the batch touched.

        Keys look like `metrics/category/Activation/exec_rate` and `metrics/overall/fast_1`.
        """
        touched: set[tuple[str, str]] = set()
        for row in filter(is_final, rows):
            groups = [("overall", "")] + [(d, key_part(row.get(d))) for d in self.dims]
            for group in groups:
                self.tallies.setdefault(group, Tally()).add(row)
                touched.add(group)
        return self._keyed(touched)

    def flat(self) -> dict[str, float]:
        """Every group's metrics now, under the same flat keys (a run's closing summary)."""
        return self._keyed(set(self.tallies))

    def _keyed(self, groups: set[tuple[str, str]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for dim, value in sorted(groups):
            prefix = f"metrics/{dim}/{value}/" if dim != "overall" else "metrics/overall/"
            out.update({prefix + k: v for k, v in self.tallies[(dim, value)].metrics().items()})
        return out
