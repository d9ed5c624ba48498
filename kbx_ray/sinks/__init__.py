"""Where a sweep's rows go: Parquet (the record), W&B (the live dashboard), the console (progress).

The engine builds one `FanOut` with `build_sinks` and calls `start`, `write_generations`,
`write_evaluations` and `close` on it. A new sink is a `Sink` subclass plus one line here.
"""
from __future__ import annotations

from pathlib import Path

from kbx_ray.sinks.base import FanOut, Sink
from kbx_ray.sinks.console import ConsoleSink, summarize
from kbx_ray.sinks.parquet import (
    EVALUATION_SCHEMA, GENERATION_SCHEMA, ParquetSink, ParquetWriteError, done_cells,
    read_generations_for_resume, read_table,
)
from kbx_ray.sinks.wandb import WandbConfig, WandbSink

__all__ = [
    "EVALUATION_SCHEMA", "GENERATION_SCHEMA", "ConsoleSink", "FanOut", "ParquetSink",
    "ParquetWriteError", "Sink", "WandbConfig", "WandbSink", "build_sinks", "done_cells",
    "read_generations_for_resume", "read_table", "summarize",
]


def build_sinks(sweep_dir: Path, sweep_id: str, wandb_cfg: WandbConfig,
                console: bool = True) -> FanOut:
    """Parquet first (critical: a batch it cannot record stops the sweep before anyone shows it),
    then W&B (its init messages print before the progress bar takes the terminal), then console.
    """
    sinks: list[Sink] = [ParquetSink(Path(sweep_dir))]
    if wandb_cfg.mode != "disabled":
        sinks.append(WandbSink(wandb_cfg, sweep_id, Path(sweep_dir)))
    if console:
        sinks.append(ConsoleSink())
    return FanOut(sinks)
