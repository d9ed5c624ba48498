"""The checks `plan.resolve` runs before Ray starts, beyond what loading a config checks.

Loading (compose.py) types every setting against the schema. `validate` re-checks a `Config` made
or edited in code against the same schema, then checks what only the registries know: the sinks
and their options, the grid's methods, and each model's backend settings. Every failure is one
line; what passes is returned, resolved, so that nothing is built twice. `check_replay` then asks
a replay source for every cell's first round.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kbx_ray.config.structured import Config, ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import Axes, Cell, build_axes
from kbx_ray.config.schema import explain, out_of_bounds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """What `validate` resolved: the grid's axes, and each sink's typed options in order."""

    axes: Axes
    sinks: dict[str, Any]


def validate(cfg: Config) -> Checked:
    """Choices and bounds, the sinks and their options, the suite format's options, the grid's
    methods (and their options) and models (and their backends' options and checks); one line
    each."""
    from kbx_ray.sinks import sink_options

    try:
        OmegaConf.structured(cfg)  # the schema's types and choices, for a Config edited in code
    except OmegaConfBaseException as e:
        raise explain(e, Config, "the config") from None
    line = out_of_bounds(cfg)  # ... and its bounds
    if line:
        raise ConfigError(line)
    sinks = sink_options(list(cfg.sinks), cfg.sink)
    cfg.suite.typed_options()  # the suite format's options= types suite.options
    axes = build_axes(cfg)  # each method variant passes check_method, or this raises its line
    for model in axes.models:
        check_backend(model, local=cfg.engine.ray_address is None)
    return Checked(axes, sinks)


def check_backend(model: ModelConfig, local: bool = True) -> None:
    """The backend exists and takes every key given: model.options typed by the options dataclass
    it registered (none registered: it takes none), then its own check where it registered one
    (cheap: no engine, no request)."""
    from kbx_ray.llm.base import REGISTRY

    backend = model.backend
    if backend not in REGISTRY:
        raise ConfigError(f"model {model.name}: unknown backend {backend!r}: choose one of "
                          f"{', '.join(sorted(REGISTRY))}")
    model.typed_options()
    check = REGISTRY.entry(backend).check
    if check is not None:
        check(model, local)


def check_replay(axes: Axes, todo: Callable[[], Iterator[Cell]]) -> None:
    """A replay model whose source cannot answer a cell's first round stops here, in one line
    (with `on_missing=skip`: one warning naming how many cells will be recorded as empty)."""
    from kbx_ray.llm.base import REGISTRY, replays

    for model in axes.models:
        if not replays(model):
            continue
        backend = REGISTRY.build(model.backend, model)
        missing, total, first = backend.unanswered(
            c for c in todo() if c.model.name == model.name)
        if not missing:
            continue
        where = backend.source
        others = {o for m in axes.methods for o in backend.other_methods(m.name)}
        hint = (f"the source's rows are of method {', '.join(sorted(others))}: set "
                "model.options.match_method=false to replay them under another method, or "
                if others else "")
        if backend.skips_missing:
            log.warning("replay: %d of the %d cells to run have no completion in %s (first: %s); "
                        "on_missing=skip records them as no_code_block", missing, total, where,
                        first)
            continue
        raise ConfigError(f"replay source {where} cannot answer {missing} of the {total} cells to "
                          f"run (first: {first}): {hint}narrow suite.include to the tasks it holds, "
                          "or add model.options.on_missing=skip to run anyway (the unanswered "
                          "cells are recorded as no_code_block)")
