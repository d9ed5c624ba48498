"""The sweep dashboard as data: the W&B workspace that pins the charts a sweep logs.

W&B cannot ship a saved workspace inside an offline run, so the workspace is described here and
applied online in one step (`python scripts/wandb_workspace.py --entity E --project P`), with the
`wandb-workspaces` package (`pip install wandb-workspaces`; imported only by `save`). Every key
named below is one the W&B sink logs (tests/integration/test_wandb_offline.py checks them against
an offline run), so a renamed metric cannot leave a silently empty panel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

X = "progress/cells_done"


@dataclass(frozen=True)
class Panel:
    kind: str                      # line | scalar
    title: str
    y: tuple[str, ...] = ()        # exact keys
    regex: str = ""                # or a pattern over keys (one series per method, model, ...)


@dataclass(frozen=True)
class Section:
    name: str
    panels: tuple[Panel, ...]
    pinned: bool = False


@dataclass(frozen=True)
class Spec:
    name: str = "kbx_ray sweeps"
    sections: tuple[Section, ...] = field(default_factory=tuple)


RATES = ("call_rate", "exec_rate", "fast_1", "fast_1p5", "fast_2")
SPEC = Spec(sections=(
    Section("Headline", pinned=True, panels=(
        Panel("line", "rates, overall", tuple(f"metrics/overall/{r}" for r in RATES)),
        Panel("line", "geomean speedup of correct kernels", ("metrics/overall/geomean_speedup",)),
        Panel("scalar", "exec rate", ("metrics/overall/exec_rate",)),
        Panel("scalar", "cells done", (X,)),
    )),
    Section("By method, model and pool", pinned=True, panels=(
        Panel("line", "exec rate per method", regex=r"metrics/method/.*/exec_rate"),
        Panel("line", "fast_1 per method", regex=r"metrics/method/.*/fast_1"),
        Panel("line", "exec rate per model", regex=r"metrics/model/.*/exec_rate"),
        Panel("line", "exec rate per GPU pool", regex=r"metrics/hardware/.*/exec_rate"),
        Panel("line", "exec rate per category", regex=r"metrics/category/.*/exec_rate"),
    )),
    Section("Generation", panels=(
        Panel("line", "tokens/s per request, per model", regex=r"generation/.*/tokens_per_s"),
        Panel("line", "truncation rate per model", regex=r"generation/.*/truncation_rate"),
        Panel("line", "mean latency (s) per model", regex=r"generation/.*/mean_latency_s"),
        Panel("line", "completion tokens per model", regex=r"generation/.*/completion_tokens"),
        Panel("line", "calls served per replica", regex=r"generation/.*/replica\d+/served"),
    )),
))


def build(entity: str, project: str, spec: Spec = SPEC) -> Any:
    """The spec as a `wandb_workspaces` Workspace (the closing `charts/*` custom charts appear by
    W&B's own panel generation, which stays on)."""
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError:
        raise SystemExit("scripts/wandb_workspace.py needs the wandb-workspaces package: "
                         "pip install wandb-workspaces") from None

    def panel(p: Panel) -> Any:
        if p.kind == "scalar":
            return wr.ScalarChart(title=p.title, metric=p.y[0])
        if p.regex:
            return wr.LinePlot(title=p.title, x=X, metric_regex=p.regex)
        return wr.LinePlot(title=p.title, x=X, y=list(p.y))

    sections = [ws.Section(name=s.name, panels=[panel(p) for p in s.panels], is_open=True,
                           pinned=s.pinned) for s in spec.sections]
    return ws.Workspace(entity=entity, project=project, name=spec.name, sections=sections,
                        auto_generate_panels=True)
