"""Sweep expansion: a config's method and model variants, and the cells of its grid.

Each variant is its preset as loaded with the command line's `method.*` / `model.*` keys applied,
so a key given once reaches every variant of the axis; a rounds axis multiplies only the methods
that run rounds. Cells are produced lazily, each with a stable id (resume skips recorded ones).
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, replace
from typing import Any, Iterator

from omegaconf import DictConfig, OmegaConf

from kbx_ray.config import (
    Config, ConfigError, MethodConfig, ModelConfig, _load_group, _merge,
)

ROUND_KINDS = ("repair", "parallel", "agentic")  # methods that run refinement rounds


@dataclass(frozen=True)
class Cell:
    """One unit of work and of resume: a task, a method, a model and a sample. The method's rounds
    are judged on the primary (first) pool; the final candidate is also evaluated on the others."""

    cell_id: str
    task_id: str
    method: MethodConfig
    model: ModelConfig
    sample: int
    hardware: tuple[str, ...]


def _cli_keys(overrides: list[str], group: str) -> DictConfig | None:
    """The command line's `<group>.*` keys: every variant of that axis takes them."""
    items = [o for o in overrides if o.startswith(f"{group}.")]
    if not items:
        return None
    return OmegaConf.from_dotlist(items)[group]


def _variants(group: str, names: list[str], default: Any, overrides: list[str]) -> list[Any]:
    if not names:
        return [default]
    schema = {"method": MethodConfig, "model": ModelConfig}[group]
    cli = _cli_keys(overrides, group)
    out = []
    for n in names:
        node = _merge(OmegaConf.structured(schema), _load_group(group, n), f"conf/{group}/{n}.yaml")
        if cli is not None:
            node = _merge(node, cli, "the command line")
        out.append(OmegaConf.to_object(node))
    return out


def methods(cfg: Config) -> list[MethodConfig]:
    """The method axis, times the sweep's `rounds` axis for methods that run rounds (a one-shot
    method at R0 and at R2 is one variant); a bad method setting stops here."""
    from kbx_ray.methods.base import check_method

    variants = _variants("method", cfg.sweep.methods, cfg.method, cfg.overrides)
    if cfg.sweep.rounds:
        # several budgets of one method are different variants: each row names its own
        # (`repair@R3`), or every table and dashboard would pool the budgets into one method
        budgets = list(dict.fromkeys(map(int, cfg.sweep.rounds)))
        label = len(budgets) > 1
        variants = [v for m in variants for v in (
            [replace(m, rounds=r, kind=m.kind or m.name, name=f"{m.name}@R{r}" if label else m.name)
             for r in budgets] if (m.kind or m.name) in ROUND_KINDS else [m])]
    for m in variants:
        problem = check_method(m)
        if problem:
            raise ConfigError(problem)
    return variants


def models(cfg: Config) -> list[ModelConfig]:
    """The model axis: the sweep's `models`, else the `model`."""
    return _variants("model", cfg.sweep.models, cfg.model, cfg.overrides)


def grid_axes(cfg: Config, tasks: list[Any]) -> tuple[list[Any], list[Any], list[Any], range]:
    return tasks, methods(cfg), models(cfg), range(cfg.sweep.samples)


def iter_cells(cfg: Config, tasks: list[Any], pools: list[str]) -> Iterator[Cell]:
    """The grid task x method x model x sample, lazily, each with a stable cell id."""
    tasks, methods, models, samples = grid_axes(cfg, tasks)
    hw = tuple(pools)
    keyed_methods = [(m, _json(OmegaConf.to_container(OmegaConf.structured(m)))) for m in methods]
    keyed_models = [(m, _json(OmegaConf.to_container(OmegaConf.structured(m)))) for m in models]
    tail = f", {_json(hw)}]"
    # cell_id = stable_hash(task_id, task_hash, method, model, sample, hw); the JSON of the parts
    # that a grid repeats is made once, and the digest of the shared prefix is copied per sample
    # (a sweep of 100k cells walks the grid several times).
    for task, (method, mk), (model, mok) in itertools.product(tasks, keyed_methods, keyed_models):
        head = hashlib.sha256(
            f"[{_json(task.task_id)}, {_json(task.task_hash)}, {mk}, {mok}, ".encode())
        for sample in samples:
            h = head.copy()
            h.update(f"{sample}{tail}".encode())
            yield Cell(h.hexdigest()[:16], task.task_id, method, model, sample, hw)


def _json(value: Any) -> str:
    """One part of `stable_hash`'s JSON, byte for byte."""
    return json.dumps(value, sort_keys=True, default=str)


def count_cells(cfg: Config, tasks: list[Any]) -> int:
    t, m, mo, s = grid_axes(cfg, tasks)
    return len(t) * len(m) * len(mo) * len(s)


def expand(cfg: Config, tasks: list[Any], pools: list[str]) -> list[Cell]:
    return list(iter_cells(cfg, tasks, pools))
