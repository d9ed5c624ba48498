"""Evaluation rows -> the study's headline numbers, kept as running tallies for live dashboards.

One cell can have several evaluation rows (a repair cell records every round); the cell's answer is
the row marked `final`. Rates are therefore over final rows, one per cell, which is what the study's
tables report. A row whose `final` is None counts as final, so that a method with one row per cell
need not set it; only `final=False` rows (intermediate rounds) are left out.
More: kbx_ray/records/README.md, `metrics.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from kbx_ray.types import ErrorKind

FAST_P = (1.0, 1.5, 2.0)
GROUP_DIMS = ("method", "model", "hardware", "category")


def is_final(row: dict) -> bool:
    return row.get("final") is not False


def awaits_gpu(row: dict) -> bool:
    """A CPU record whose verdict waits for a GPU: the Triton interpreter lacks a construct the
    kernel uses (`unsupported_interpreter`, flag `awaits_gpu`). It is no pass, whatever else the
    row says: a wrong kernel hides behind such a construct as well as a right one."""
    flags = row.get("flags")
    return row.get("error_kind") == ErrorKind.UNSUPPORTED_INTERPRETER or (
        isinstance(flags, (list, tuple)) and "awaits_gpu" in flags)


def passed(row: dict) -> bool:
    """The row is a correct kernel: `exec_ok`, and not a verdict that still awaits a GPU."""
    return bool(row.get("exec_ok")) and not awaits_gpu(row)


def fast_key(p: float) -> str:
    """fast_1, fast_1p5, fast_2: W&B reads '.' in a key as nesting, so it is spelled 'p'."""
    return "fast_" + f"{p:g}".replace(".", "p")


def key_part(value: object) -> str:
    """A group value as one W&B key segment: '/' would open a new panel section."""
    return str(value if value not in (None, "") else "unknown").replace("/", "_")


@dataclass
class GeoMean:
    """The project's one geometric mean, kept as a running sum of logs so that a live sink adds
    rows one at a time and merges groups by `+`. Only positive, finite values count."""

    log_sum: float = 0.0
    n: int = 0

    def add(self, value: float | None) -> bool:
        """Count `value` if it is positive and finite; say whether it counted."""
        if value is None or not value > 0 or not math.isfinite(value):
            return False
        self.log_sum += math.log(value)
        self.n += 1
        return True

    def __add__(self, other: GeoMean) -> GeoMean:
        return GeoMean(self.log_sum + other.log_sum, self.n + other.n)

    @property
    def value(self) -> float:
        """NaN while nothing has counted."""
        return math.exp(self.log_sum / self.n) if self.n else math.nan


def geomean(values: Iterable[float | None]) -> float:
    """Geometric mean of the positive, finite values; NaN when there are none."""
    g = GeoMean()
    for v in values:
        g.add(v)
    return g.value


@dataclass
class Tally:
    """Counts for one group; cheap to update per row and to turn into rates at any time."""

    cells: int = 0
    call_ok: int = 0
    exec_ok: int = 0
    awaits_gpu: int = 0  # CPU rows with no verdict yet (counted as failures in every rate)
    fast: dict[float, int] = field(default_factory=lambda: {p: 0 for p in FAST_P})
    speedup: GeoMean = field(default_factory=GeoMean)
    sol_sum: float = 0.0
    n_sol: int = 0

    def add(self, row: dict) -> None:
        self.cells += 1
        self.call_ok += bool(row.get("call_ok"))
        ok = passed(row)
        self.exec_ok += ok
        self.awaits_gpu += awaits_gpu(row)
        speedup, sol = row.get("speedup"), row.get("sol_fraction")
        if ok and self.speedup.add(speedup):
            for p in FAST_P:
                self.fast[p] += speedup > p
        if ok and sol is not None and math.isfinite(sol):
            self.sol_sum += sol
            self.n_sol += 1

    def metrics(self) -> dict[str, float]:
        n = max(self.cells, 1)
        out = {"cells": float(self.cells), "call_rate": self.call_ok / n,
               "exec_rate": self.exec_ok / n, "awaits_gpu_rate": self.awaits_gpu / n}
        out.update({fast_key(p): self.fast[p] / n for p in FAST_P})
        if self.speedup.n:
            out["geomean_speedup"] = self.speedup.value
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
