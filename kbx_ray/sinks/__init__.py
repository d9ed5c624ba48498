"""Where a sweep's rows go: Parquet (the record), W&B (the live dashboard), the console (progress).

The engine builds one `FanOut` with `build_sinks` and calls `start`, `write_generations`,
`write_evaluations` and `close` on it. A new sink is a `Sink` subclass plus one line here.
Names are resolved lazily, so that loading a config (which needs only `WandbConfig`) does not
import pandas and pyarrow.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

_EXPORTS = {
    "FanOut": "base", "Sink": "base", "ConsoleSink": "console", "summarize": "console",
    "EVALUATION_SCHEMA": "parquet", "GENERATION_SCHEMA": "parquet", "ParquetSink": "parquet",
    "ParquetWriteError": "parquet", "clean_tmp": "parquet", "done_cells": "parquet",
    "read_table": "parquet", "read_rows": "parquet", "written_generations": "parquet",
    "WandbConfig": "wandb_config", "WandbSink": "wandb",
}
__all__ = sorted([*_EXPORTS, "build_sinks"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"kbx_ray.sinks.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'kbx_ray.sinks' has no attribute {name!r}")


def build_sinks(sweep_dir: Path, sweep_id: str, wandb_cfg: Any, console: bool = True,
                extra: list[Any] | None = None) -> Any:
    """Parquet first (critical: a batch it cannot record stops the sweep before anyone shows it),
    then `extra` (the engine's run record: it closes before W&B logs it), then W&B, then console.
    """
    from kbx_ray.sinks.base import FanOut, Sink
    from kbx_ray.sinks.console import ConsoleSink
    from kbx_ray.sinks.parquet import ParquetSink
    from kbx_ray.sinks.wandb import WandbSink

    sinks: list[Sink] = [ParquetSink(Path(sweep_dir)), *(extra or [])]
    if wandb_cfg.mode != "disabled":
        sinks.append(WandbSink(wandb_cfg, sweep_id, Path(sweep_dir)))
    if console:
        sinks.append(ConsoleSink())
    return FanOut(sinks)
