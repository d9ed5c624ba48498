"""Every choice-valued setting checked against its choices, before anything starts.

A typo in a choice must never weaken a verdict quietly (`evaluation.torch_compute=fial` once turned
an integrity failure into a flag, and `landlock=on` read as the YAML boolean True switched the
sandbox's Landlock off), so each key is checked here, and `on`/`true`-style values that the override
grammar reads as booleans are spelled back to the choice they name. `check_choices` is cheap (every
command runs it); `validate` adds the grid and the model backends and is what `engine.plan` calls,
before Ray starts. Every failure is one `ConfigError` line that names the key and its choices.
"""
from __future__ import annotations

from typing import Any

from kbx_ray.config import Config, ModelConfig, check_choices
from kbx_ray.errors import ConfigError, unknown_keys

def validate(cfg: Config) -> None:
    """Choices, the sinks, the grid's methods and models, and each model's backend settings; one
    line each."""
    from kbx_ray.grid import methods, models
    from kbx_ray.sinks import check_sinks

    check_choices(cfg)
    problem = check_sinks(list(cfg.sinks))
    if problem:
        raise ConfigError(problem)
    methods(cfg)  # each method variant passes check_method, or this raises its line
    for model in models(cfg):
        check_backend(model, local=cfg.engine.ray_address is None)


def check_backend(model: ModelConfig, local: bool = True) -> None:
    """The backend exists and takes every key given: its own check where it registered one (cheap:
    no engine, no request), else it takes no model.options and no model.engine keys."""
    from kbx_ray.llm.base import REGISTRY

    backend = model.backend
    if backend not in REGISTRY:
        raise ConfigError(f"model {model.name}: unknown backend {backend!r}: choose one of "
                          f"{', '.join(sorted(REGISTRY))}")
    check = REGISTRY.entry(backend).check
    if check is not None:
        check(model, local)
        return
    unknown_keys(model, "options", model.options, set())
    unknown_keys(model, "engine", model.engine, set())
