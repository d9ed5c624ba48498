"""Sweep expansion: a config's axes (method and model variants, samples), and the cells of its grid.

Each variant is its preset as loaded with the command line's `method.*` / `model.*` keys applied;
`build_axes` loads them once per run (plan.py), and everything after reads the `Axes`. A rounds
axis multiplies only the methods that run rounds. Cells are produced lazily, each with a stable id.
A replay sweep covers the tasks and samples its source holds (`narrow_to_sources`).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from kbx_ray.config.compose import _load_group, _merge
from kbx_ray.config.structured import Config, MethodConfig, ModelConfig, SuiteConfig
from kbx_ray.errors import ConfigError
from kbx_ray.suites.task_import import select_ids
from kbx_ray.types import Task

log = logging.getLogger(__name__)

def runs_rounds(kind: str) -> bool:
    """Whether the method registered as `kind` declared `runs_rounds` (an unknown one is named by
    check_method)."""
    from kbx_ray.methods.base import REGISTRY

    return kind in REGISTRY and REGISTRY.entry(kind).runs_rounds


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


@dataclass(frozen=True)
class Axes:
    """The grid's axes beside the tasks and pools, each variant built once from its preset."""

    methods: tuple[MethodConfig, ...]
    models: tuple[ModelConfig, ...]
    samples: int
    per_task: Mapping[str, int] | None = None  # task id -> samples, where a replay source says


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
        node = _merge(OmegaConf.structured(schema), _load_group(group, n),
                      f"conf/{group}/{n}.yaml", schema, f"{group}.")
        if cli is not None:
            node = _merge(node, cli, "the command line", schema, f"{group}.")
        out.append(OmegaConf.to_object(node))
    return out


def _methods(cfg: Config) -> list[MethodConfig]:
    """The method axis, times the sweep's `rounds` axis for methods that run rounds (a one-shot
    method at R0 and at R2 is one variant); a bad method setting stops here."""
    from kbx_ray.methods.base import check_method

    variants = _variants("method", cfg.sweep.methods, cfg.method, cfg.overrides)
    if cfg.sweep.rounds:
        # several budgets of one method are different variants: each row names its own
        # (`repair@R3`), or every table and dashboard would merge the budgets into one method
        budgets = list(dict.fromkeys(map(int, cfg.sweep.rounds)))
        label = len(budgets) > 1
        variants = [v for m in variants for v in (
            [replace(m, rounds=r, kind=m.kind or m.name, name=f"{m.name}@R{r}" if label else m.name)
             for r in budgets] if runs_rounds(m.kind or m.name) else [m])]
    for m in variants:
        problem = check_method(m)
        if problem:
            raise ConfigError(problem)
    return variants


def build_axes(cfg: Config) -> Axes:
    """The method axis (times the sweep's rounds, for methods that run rounds; a bad method
    setting stops here), the model axis (the sweep's `models`, else the `model`), and samples:
    each preset read once."""
    methods = tuple(_methods(cfg))
    models = tuple(_variants("model", cfg.sweep.models, cfg.model, cfg.overrides))
    return Axes(methods, models, cfg.sweep.samples)


def iter_cells(axes: Axes, tasks: Sequence[Task], pools: Sequence[str]) -> Iterator[Cell]:
    """The grid task x method x model x sample, lazily, each with a stable cell id; `per_task`
    (task id -> samples) replaces `samples` for the tasks it names."""
    per_task, samples = axes.per_task, range(axes.samples)
    hw = tuple(pools)
    keyed_methods = [(m, _json(m.hashed())) for m in axes.methods]  # the layout ids were made of
    keyed_models = [(m, _json(m.hashed())) for m in axes.models]
    tail = f", {_json(hw)}]"
    # cell_id = stable_hash(task_id, task_hash, method, model, sample, hw); the JSON of the parts
    # that a grid repeats is made once, and the digest of the shared prefix is copied per sample
    # (a sweep of 100k cells walks the grid several times).
    for task, (method, mk), (model, mok) in itertools.product(tasks, keyed_methods, keyed_models):
        head = hashlib.sha256(
            f"[{_json(task.task_id)}, {_json(task.task_hash)}, {mk}, {mok}, ".encode())
        for sample in range(per_task.get(task.task_id, len(samples))) if per_task else samples:
            h = head.copy()
            h.update(f"{sample}{tail}".encode())
            yield Cell(h.hexdigest()[:16], task.task_id, method, model, sample, hw)


def _json(value: Any) -> str:
    """One part of `stable_hash`'s JSON, byte for byte."""
    return json.dumps(value, sort_keys=True, default=str)


def count_cells(axes: Axes, tasks: Sequence[Task]) -> int:
    per_task = axes.per_task
    n = sum(per_task.get(t.task_id, axes.samples) for t in tasks) if per_task else \
        len(tasks) * axes.samples
    return n * len(axes.methods) * len(axes.models)


def narrow_to_sources(suite: SuiteConfig, models: Sequence[ModelConfig], cap: int | None
                      ) -> tuple[list[str] | None, dict[str, int] | None]:
    """(the tasks to load, samples per task) of the sweep: `suite.include` as given, unless every
    model replays another harness's kernels (llm/replay_files.py). Then the grid covers the tasks
    those hold, each with as many samples as it holds kernels (at most `sweep.samples` where a
    config sets it), said in one log line. An explicit `suite.include` still chooses: it is
    intersected with them, and a task id it names that no kernel answers is an error. `cap`:
    `sweep.samples` where a config sets it (`sample_cap`)."""
    from kbx_ray.llm.base import REGISTRY, replays

    include = list(suite.include) or None
    if not all(replays(m) for m in models):
        return include, None
    backends = [REGISTRY.build(m.backend, m) for m in models]
    helds = [b.held_tasks() for b in backends]
    listing = _suite_ids(suite)
    if any(h is None for h in helds) or listing is None:
        return include, None  # a sweep's generations answer the grid; a bad suite.path says so
    held: dict[str, int] = {}
    for h in helds:
        for task_id, n in (h or {}).items():
            held[task_id] = max(held.get(task_id, 0), n)
    listed, known = listing
    where = ", ".join(dict.fromkeys(b.source for b in backends))
    unknown = [t for t in held if t not in known]
    if unknown:
        at = f" at {suite.path}" if suite.path else ""
        raise ConfigError(f"replay source {where} holds kernels for {len(unknown)} task(s) that "
                          f"suite={suite.name}{at} lacks "
                          f"({', '.join(unknown[:5])}): fix their \"file\" fields, or point "
                          "suite.path at their tree")
    if include:
        named = {str(p).strip().rstrip("/") for p in include}
        chosen = [i for i in select_ids(known, include) if i in listed or i in named]
        skip = all(b.skips_missing for b in backends)
        lacking = [i for i in chosen if i in named and i not in held]
        if lacking and not skip:
            raise ConfigError(f"suite.include names {len(lacking)} task(s) that {where} holds no "
                              f"kernel for: {', '.join(lacking)}: drop them from suite.include, or "
                              "set model.options.on_missing=skip to record them as no_code_block")
        ids = [i for i in chosen if i in held or i in lacking]
        if not ids:
            raise ConfigError(f"suite.include and {where} share no task: include some of "
                              f"{', '.join(list(held)[:5])}, or leave suite.include out")
        log.info("replay: %d of the %d tasks suite.include selects have kernels in %s; the sweep "
                 "covers those", len([i for i in ids if i in held]), len(chosen), where)
    else:
        ids = [i for i in known if i in held]
        log.info("replay: %d of %d tasks have kernels in %s; the sweep covers those", len(ids),
                 len(listed), where)
    return ids, {i: min(held.get(i, 1), cap or held.get(i, 1)) for i in ids}


def sample_cap(cfg: Config) -> int | None:
    """`sweep.samples` where the command line or a sweep preset sets it (1 is also the default)."""
    given = cfg.sweep.samples != 1 or any(o.lstrip("+").split("=")[0] == "sweep.samples"
                                          for o in cfg.overrides)
    return cfg.sweep.samples if given else None


def _suite_ids(suite: SuiteConfig) -> tuple[list[str], list[str]] | None:
    """(the suite's listed task ids, every id it loads), listed without building a task; None where
    the suite's folder cannot be listed (loading it then names the problem)."""
    from kbx_ray.errors import SuiteError
    from kbx_ray.suites.builtin import DEFAULT_ROOT

    root = Path(suite.path or DEFAULT_ROOT).expanduser().resolve()
    try:
        if suite.name == "kbx":
            ids = [p.parent.relative_to(root).as_posix() for p in sorted(root.glob("*/*/task.py"))]
            return ids, ids
        from kbx_ray.suites import suite_format

        fmt = suite_format(suite.name, suite.options)
        if fmt.ids is not None and suite.path:
            return fmt.ids(root)
    except (SuiteError, OSError):
        pass
    return None
