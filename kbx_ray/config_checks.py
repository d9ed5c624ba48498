"""Every choice-valued setting checked against its choices, before anything starts.

A typo in a choice must never weaken a verdict quietly (`evaluation.torch_compute=fial` once turned
an integrity failure into a flag, and `landlock=on` read as the YAML boolean True switched the
sandbox's Landlock off), so each key is checked here, and `on`/`true`-style values that the override
grammar reads as booleans are spelled back to the choice they name. `check_choices` is cheap (every
command runs it); `validate` adds the grid and the model backends and is what `engine.plan` calls,
before Ray starts. Every failure is one `ConfigError` line that names the key and its choices.
"""
from __future__ import annotations

import ast
import difflib
import importlib.util
import logging
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from kbx_ray.config import ConfigError

log = logging.getLogger(__name__)

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
    """The backend exists and takes every option key given; the backends' own checks where they
    are cheap (no engine, no request). A local weights folder that is missing names its setup."""
    from kbx_ray.llm.base import REGISTRY

    backend = model.backend
    if backend not in REGISTRY:
        raise ConfigError(f"model {model.name}: unknown backend {backend!r}: choose one of "
                          f"{', '.join(sorted(REGISTRY))}")
    if backend == "vllm":
        from kbx_ray.llm.vllm_spec import spec_from

        spec_from(model)  # options and placement keys, weights, tensor parallel
        _check_engine_keys(model)
        if local:
            _check_local_weights(model)
    elif backend == "openai":
        from kbx_ray.llm.openai_http import settings_from

        settings_from(model)
    elif backend == "replay":
        from kbx_ray.llm.replay import ReplayOptions

        _unknown(model, "options", model.options, {f.name for f in fields(ReplayOptions)})
    elif backend == "mutants":
        _unknown(model, "options", model.options, {"per_operator"})
    else:
        _unknown(model, "options", model.options, set())
    if backend != "vllm":
        _unknown(model, "engine", model.engine, set())


def _unknown(model: Any, kind: str, given: dict, known: set[str]) -> None:
    bad = sorted(set(given or {}) - known)
    if bad:
        where = f"known: {', '.join(sorted(known))}" if known else "it takes none"
        if len(known) > 12:  # vLLM's hundreds of engine arguments: the near ones only
            near = sorted({m for b in bad for m in difflib.get_close_matches(b, known, n=3)})
            where = (f"did you mean {', '.join(near)}?" if near else
                     f"none of the {len(known)} engine arguments")
        raise ConfigError(f"model {model.name}: unknown model.{kind} keys for the {model.backend} "
                          f"backend: {', '.join(bad)} ({where})")


def _check_engine_keys(model: Any) -> None:
    known = engine_arg_names()
    if known:
        _unknown(model, "engine", {k: v for k, v in model.engine.items() if k != "model"}, known)


@lru_cache(maxsize=1)
def engine_arg_names() -> frozenset[str]:
    """vLLM's AsyncEngineArgs fields, read from its source (importing vllm takes seconds); empty
    when vllm is not installed on this machine (the replicas' nodes check them then)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    source = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    try:
        tree = ast.parse(source.read_text())
    except (OSError, SyntaxError):
        log.debug("vllm engine arguments not readable from %s; model.engine is not checked", source)
        return frozenset()
    names = {t.target.id for node in tree.body if isinstance(node, ast.ClassDef)
             and node.name in ("EngineArgs", "AsyncEngineArgs") for t in node.body
             if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
    return frozenset(names)


def _check_local_weights(model: Any) -> None:
    from kbx_ray.config import setup_hint

    path = str(model.path or model.engine.get("model", ""))
    if not path.startswith(("/", "./", "~")) or Path(path).expanduser().is_dir():
        return
    hint = setup_hint(model.name, path)
    raise ConfigError(f"model {model.name}: weights folder {path} does not exist: "
                      + (f"build it with `{hint}`" if hint else "set model.path to a local folder "
                         "or a Hugging Face id"))
