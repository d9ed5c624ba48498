"""A config resolved once into a typed, frozen `Sweep`: what every part of a run reads.

`resolve` checks the config (preflight.py), builds the grid's axes (each preset read once), loads
the tasks, resolves the pools, names and checks the sweep folder, and finds what is recorded. The
dry run, provenance, the evaluator groups and the engine read the `Sweep`, each its own piece.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from kbx_ray.config import hardware
from kbx_ray.records import sweep_folder
from kbx_ray.config.structured import Config, EngineConfig
from kbx_ray.errors import ConfigError
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.orchestration.grid import (
    Axes, Cell, count_cells, iter_cells, narrow_to_sources, sample_cap,
)
from kbx_ray.types import Task


@dataclass(frozen=True)
class Sweep:
    """One sweep, planned: everything that can be known and checked before Ray starts."""

    sweep_id: str
    sweep_dir: Path
    axes: Axes                                # method and model variants, samples
    tasks: dict[str, Task]
    pools: dict[str, hardware.HardwarePool]   # in `hardware` order: the first is the primary
    evaluation: EvalConfig
    engine: EngineConfig
    sinks: dict[str, Any]                     # sink name -> its typed options, in order
    identity: dict[str, Any]                  # identity.json: what makes the sweep what it is
    config: dict[str, Any]                    # config.yaml, and the W&B run's config
    named_pools: tuple[str, ...]              # `hardware` as given (`auto`: this machine's)
    force_resume: bool
    done: frozenset[str]                      # cells recorded when the plan was made
    n_cells: int

    def cells(self) -> Iterator[Cell]:
        return iter_cells(self.axes, list(self.tasks.values()), list(self.pools))

    def todo(self) -> Iterator[Cell]:
        return (c for c in self.cells() if c.cell_id not in self.done)

    @cached_property
    def n_todo(self) -> int:
        """Cells not yet recorded (counted once: `done` is fixed when the plan is made)."""
        done = sum(1 for c in self.cells() if c.cell_id in self.done) if self.done else 0
        return self.n_cells - done


def resolve_pools(names: list[str]) -> dict[str, hardware.HardwarePool]:
    pools = {}
    for name in names:
        try:
            pool = hardware.detect_local() if name == "auto" else hardware.get_pool(name)
        except KeyError as e:
            raise ConfigError(str(e)) from None
        pools[pool.name] = pool
    return pools


def resolve(cfg: Config) -> Sweep:
    """The config, checked and resolved once: tasks, pools, the grid, resume, and that a replay
    source answers every cell (another harness's kernels name the tasks)."""
    from kbx_ray.config.preflight import check_replay, validate
    from kbx_ray.records.provenance import resolved
    from kbx_ray.sinks import done_cells
    from kbx_ray.suites.builtin import load_suite

    checked = validate(cfg)
    include, per_task = narrow_to_sources(cfg.suite, checked.axes.models, sample_cap(cfg))
    axes = replace(checked.axes, per_task=per_task)
    tasks = load_suite(cfg.suite.path, include, cfg.suite.name, options=cfg.suite.options)
    pools = resolve_pools(cfg.hardware)
    key = sweep_folder.identity_key(cfg, axes)
    sid = sweep_folder.folder_name(cfg, key)
    sweep_dir = Path(cfg.output_dir) / sid
    sweep_folder.check_folder(key, sweep_dir, cfg.force_resume)
    done = frozenset(done_cells(sweep_dir)) if sweep_dir.exists() else frozenset()
    sweep = Sweep(sid, sweep_dir, axes, {t.task_id: t for t in tasks}, pools,
                  cfg.evaluation, cfg.engine, checked.sinks, key, resolved(cfg, axes, list(pools)),
                  tuple(cfg.hardware), cfg.force_resume, done, count_cells(axes, tasks))
    check_replay(axes, sweep.todo)
    return sweep
