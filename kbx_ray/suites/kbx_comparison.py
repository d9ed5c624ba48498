"""KernelBench-X's comparison as a task's `check`, for tasks with declared-mutated arguments or
quantization thresholds.
More: kbx_ray/suites/README.md, `kbx_comparison.py`.
"""
from __future__ import annotations

from typing import Any

import torch

from kbx_ray.evaluate.parent.correctness import DEFAULT_TOLERANCE, _close
from kbx_ray.suites.quant_metrics import QuantizationCheck

MUTATED_NOTE = "mutated argument"


class PeerCheck:
    def __init__(self, tolerance: dict[str, tuple[float, float]],
                 thresholds: dict[str, float] | None) -> None:
        self.table = {**DEFAULT_TOLERANCE, **tolerance}
        self.quant = QuantizationCheck(thresholds) if thresholds is not None else None
        self.thresholds = self.quant.thresholds if self.quant else None

    def __call__(self, out: list[torch.Tensor], ref: list[torch.Tensor], case: Any) -> str | None:
        names = list((case or {}).get("mutated_args", ()))
        n = len(ref) - len(names)
        if self.quant is not None:
            why = self.quant(out[:n], ref[:n], case)
            if why:
                return why
        for i, (o, r) in enumerate(zip(out, ref)):
            if self.quant is not None and i < n:
                continue
            v = _close(o, r, self.table)
            if not v.ok:
                what = f"{MUTATED_NOTE} {names[i - n]!r}" if i >= n else f"output {i}"
                return f"{what}: {v.message}"
        return None
