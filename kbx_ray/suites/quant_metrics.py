"""KernelBench-X's verdict for quantization tasks: cosine similarity, relative L1 and RMSE.
More: kbx_ray/suites/README.md, `quant_metrics.py`.
"""
from __future__ import annotations

from typing import Any

import torch

DEFAULTS = {"cosine_sim": 0.99, "l1_relative": 0.01, "rmse": 0.01}


def metrics(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """Cosine (1 when both are all zero, 0 when only one is), relative L1 and RMSE, in float64."""
    x, r = out.detach().double().reshape(-1), ref.detach().double().reshape(-1)
    nx, nr = float(x.norm()), float(r.norm())
    if nx < 1e-12 or nr < 1e-12:
        cosine = 1.0 if nx < 1e-12 and nr < 1e-12 else 0.0
    else:
        cosine = float(x.dot(r) / (nx * nr))
    diff = x - r
    l1 = float(diff.abs().sum() / r.abs().sum().clamp_min(1e-12)) if r.numel() else 0.0
    rmse = float(diff.square().mean().sqrt()) if r.numel() else 0.0
    return {"cosine_sim": cosine, "l1_relative": l1, "rmse": rmse}


class QuantizationCheck:
    """The task's `check(out, ref, case)`: None when every output passes, else why not."""

    def __init__(self, thresholds: dict[str, float] | None) -> None:
        self.thresholds = {**DEFAULTS, **(thresholds or {})}

    def __call__(self, out: list[torch.Tensor], ref: list[torch.Tensor], case: Any) -> str | None:
        t = self.thresholds
        for i, (o, r) in enumerate(zip(out, ref)):
            m = metrics(o, r)
            ok = (m["cosine_sim"] >= t["cosine_sim"] and m["l1_relative"] <= t["l1_relative"]
                  and m["rmse"] <= t["rmse"])  # NaN compares False: it fails, as in the peer
            if not ok:
                return (f"output {i}: cosine {m['cosine_sim']:.4f} (>= {t['cosine_sim']}), "
                        f"relative L1 {m['l1_relative']:.4f} (<= {t['l1_relative']}), RMSE "
                        f"{m['rmse']:.4f} (<= {t['rmse']}): KernelBench-X's quantization "
                        "thresholds not met")
        return None
