"""Where a sweep's rows go: Parquet (the record), W&B (the live dashboard), the console (progress).

The engine builds one `FanOut` with `build_sinks` and calls `start`, `write_generations`,
`write_evaluations` and `close` on it. Each sink is a module here whose factory carries
`@register("sink", name)` (kbx_ray/registry.py); `sinks` in conf/config.yaml names the ones a sweep
uses, and `sink.<name>.*` its options. Names are resolved lazily, so that importing this package
does not import pandas and pyarrow.
"""
from __future__ import annotations

import importlib
from dataclasses import replace
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from kbx_ray.registry import MissingDependencyError, registry

if TYPE_CHECKING:  # only typed here: the sinks themselves import it when they are built
    from kbx_ray.sinks.base import FanOut, Sink

_EXPORTS = {
    "FanOut": "base", "Sink": "base", "SinkContext": "base", "ConsoleSink": "console",
    "summarize": "console", "EVALUATION_SCHEMA": "parquet", "GENERATION_SCHEMA": "parquet",
    "ParquetSink": "parquet", "ParquetWriteError": "parquet", "clean_tmp": "parquet",
    "done_cells": "parquet", "read_table": "parquet", "read_rows": "parquet",
    "written_generations": "parquet", "WandbSink": "wandb",
}
__all__ = sorted([*_EXPORTS, "build_sinks", "check_sinks", "option_defaults", "option_types",
                  "sink_options"])
RECORD = "parquet"  # always first: the record a sweep resumes from and the report reads
log = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"kbx_ray.sinks.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'kbx_ray.sinks' has no attribute {name!r}")


def check_sinks(names: list[str]) -> str | None:
    """One line naming an unknown sink and the known ones, or None; run before anything starts."""
    known = registry("sink")
    unknown = [n for n in names if n not in known]
    if unknown:
        return (f"unknown sink {unknown[0]!r} in sinks={list(names)}: choose from "
                f"{', '.join(known)}, or add kbx_ray/sinks/{unknown[0]}.py")
    return None


def sink_options(names: list[str], given: Mapping[str, Any]) -> dict[str, Any]:
    """Each sink of `names` (the config's `sinks`), in order (Parquet left out: it always comes
    first) -> its options from `given` (the config's `sink`), typed by the dataclass it registered
    (`options=`); None for a sink that registered none. An unknown sink, key or value is one
    ConfigError line."""
    from kbx_ray.errors import ConfigError
    from kbx_ray.config.schema import typed

    problem = check_sinks(list(names))
    if problem:
        raise ConfigError(problem)
    out: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        schema = registry("sink").entry(name).options
        if name != RECORD:
            out[name] = None if schema is None else typed(schema, given.get(name), f"sink.{name}.",
                                                          f"sink {name}")
    return out


def option_types() -> dict[str, type]:
    """sink name -> the options dataclass it registered, for each registered sink that takes any."""
    known = registry("sink")
    return {n: known.entry(n).options for n in known if known.entry(n).options is not None}


def option_defaults() -> dict[str, Any]:
    """sink name -> its options at their defaults (conf/config.yaml shows them under `sink`)."""
    from omegaconf import OmegaConf

    return {n: OmegaConf.to_container(OmegaConf.structured(t), enum_to_str=True)
            for n, t in option_types().items()}


def build_sinks(sweep_dir: Path, sweep_id: str, options: Mapping[str, Any],
                extra: list[Sink] | None = None) -> FanOut:
    """Parquet first (critical: a batch it cannot record stops the sweep before anyone shows it),
    then `extra` (the engine's run record: it closes before W&B logs it), then the sinks of
    `options` (`sink_options`) in their order (W&B, then the console, by default). A factory
    that returns None is off by its options (sink.wandb.mode=disabled); one whose package is missing
    is left out after a warning with the install hint, since only the record may stop a sweep.
    """
    from kbx_ray.sinks.base import FanOut, SinkContext

    ctx = SinkContext(Path(sweep_dir), sweep_id)
    known = registry("sink")
    sinks: list[Sink] = [known.build(RECORD, ctx), *(extra or [])]
    for name, own in options.items():
        try:
            sink = known.build(name, replace(ctx, options=own))
        except MissingDependencyError as e:
            log.warning("%s; the sweep goes on without it (results are still written to Parquet)",
                        e)
            continue
        if sink is not None:
            sinks.append(sink)
    return FanOut(sinks)
