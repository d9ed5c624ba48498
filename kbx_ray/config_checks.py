"""Every choice-valued setting checked against its choices, before anything starts.

A typo in a choice must never weaken a verdict quietly (`evaluation.torch_compute=fial` once turned
an integrity failure into a flag, and `landlock=on` read as the YAML boolean True switched the
sandbox's Landlock off), so each key is checked here, and `on`/`true`-style values that the override
grammar reads as booleans are spelled back to the choice they name. `check_choices` is cheap (every
command runs it); `validate` adds the grid and the model backends and is what `engine.plan` calls,
before Ray starts. Every failure is one `ConfigError` line that names the key and its choices.
"""
from __future__ import annotations

import difflib
from typing import Any

from kbx_ray.config import ConfigError

# (dotted key, choices, aliases of the booleans the override grammar makes of on/off/true/false)
_ONOFF = {"True": "on", "False": "off", "true": "on", "false": "off"}
_TRUEFALSE = {"True": "true", "False": "false"}
CHOICES: tuple[tuple[str, tuple[str, ...], dict[str, str]], ...] = (
    ("evaluation.device", ("auto", "cuda", "cpu"), {}),
    ("evaluation.small_only", ("auto", "true", "false"), _TRUEFALSE),
    ("evaluation.torch_compute", ("fail", "flag"), {}),
    ("evaluation.timing_cases", ("large", "all"), {}),
    ("evaluation.sandbox.landlock", ("auto", "on", "off"), _ONOFF),
    ("engine.mode", ("actor", "task", "noop"), {}),
    ("engine.aot_compile", ("off", "on", "always"), _ONOFF),
    ("wandb.mode", ("offline", "online", "disabled"), {}),
)


def _get(obj: Any, dotted: str) -> tuple[Any, str]:
    *parents, leaf = dotted.split(".")
    for p in parents:
        obj = getattr(obj, p)
    return obj, leaf


def check_choices(cfg: Any) -> None:
    """Spell boolean-read choices back, then refuse any value outside its choices."""
    for key, choices, aliases in CHOICES:
        owner, leaf = _get(cfg, key)
        value = str(getattr(owner, leaf))
        value = aliases.get(value, value)
        if value not in choices:
            raise ConfigError(f"{key}={value!r} is not a choice: choose one of {', '.join(choices)}")
        setattr(owner, leaf, value)


def validate(cfg: Any) -> None:
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


def check_backend(model: Any, local: bool = True) -> None:
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


def unknown_keys(model: Any, kind: str, given: dict, known: set[str] | frozenset[str]) -> None:
    """One line naming the keys of model.<kind> that the backend does not take."""
    bad = sorted(set(given or {}) - known)
    if bad:
        where = f"known: {', '.join(sorted(known))}" if known else "it takes none"
        if len(known) > 12:  # vLLM's hundreds of engine arguments: the near ones only
            near = sorted({m for b in bad for m in difflib.get_close_matches(b, known, n=3)})
            where = (f"did you mean {', '.join(near)}?" if near else
                     f"none of the {len(known)} engine arguments")
        raise ConfigError(f"model {model.name}: unknown model.{kind} keys for the {model.backend} "
                          f"backend: {', '.join(bad)} ({where})")
