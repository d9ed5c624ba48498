"""The checks `engine.plan` runs before Ray starts, beyond what loading a config checks.

Loading (config.py) types every setting against the schema: a choice outside its Enum, an unknown
key or a value of the wrong type is one `ConfigError` line there. `validate` re-checks a `Config`
made or edited in code against the same schema, then checks what only the registries know: the
sinks, the grid's methods, and each model's backend settings. Every failure is one line.
"""
from __future__ import annotations

from dataclasses import fields

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kbx_ray.config import Config, ModelConfig
from kbx_ray.errors import ConfigError, unknown_keys
from kbx_ray.schema import explain, typed


def validate(cfg: Config) -> None:
    """Choices, the sinks, the grid's methods and models, and each model's backend settings; one
    line each."""
    from kbx_ray.grid import methods, models
    from kbx_ray.sinks import check_sinks, sink_settings

    try:
        OmegaConf.structured(cfg)  # the schema's types and choices, for a Config edited in code
    except OmegaConfBaseException as e:
        raise explain(e, Config, "the config") from None
    problem = check_sinks(list(cfg.sinks))
    if problem:
        raise ConfigError(problem)
    for name in cfg.sinks:
        sink_settings(name, cfg)  # each sink's own settings, typed by what it registered
    methods(cfg)  # each method variant passes check_method, or this raises its line
    for model in models(cfg):
        check_backend(model, local=cfg.engine.ray_address is None)


def check_backend(model: ModelConfig, local: bool = True) -> None:
    """The backend exists and takes every key given: model.options typed by the options dataclass
    it registered, then its own check where it registered one (cheap: no engine, no request);
    without a check it takes no model.engine keys (and, without options, no model.options)."""
    from kbx_ray.llm.base import REGISTRY

    backend = model.backend
    if backend not in REGISTRY:
        raise ConfigError(f"model {model.name}: unknown backend {backend!r}: choose one of "
                          f"{', '.join(sorted(REGISTRY))}")
    entry = REGISTRY.entry(backend)
    if entry.options is not None:  # the options dataclass it registered types model.options
        unknown_keys(model, "options", model.options, [f.name for f in fields(entry.options)])
        typed(entry.options, model.options, "model.options.", f"model {model.name}")
    if entry.check is not None:
        entry.check(model, local)
        return
    if entry.options is None:
        unknown_keys(model, "options", model.options, set())
    unknown_keys(model, "engine", model.engine, set())
