"""Evaluation rows -> one W&B run per sweep: a live table of every evaluation and running metrics.

W&B is a dashboard, not the record (Parquet is), so nothing W&B does may stop a sweep: a missing
package, a failed init, a network error all log one warning and turn the sink off. `wandb` is
imported lazily so that the package, the workers and CI never need it.
More: kbx_ray/sinks/README.md, `wandb.py`.
"""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Callable

from kbx_ray.registry import register
from kbx_ray.sinks.base import Sink, SinkContext
from kbx_ray.sinks.wandb_settings import WandbConfig
from kbx_ray.records.metrics import RunningMetrics
from kbx_ray.sinks.wandb_plots import compact, final_charts
from kbx_ray.sinks.wandb_runs import (
    GenerationTally, RunState, avoid_same_second, init_args, log_artifacts,
)
from kbx_ray.sinks.parquet import EVALUATION_SCHEMA, read_rows

logger = logging.getLogger(__name__)

TABLE_COLUMNS = [name for name in EVALUATION_SCHEMA.names if name not in ("cases", "stage_s")]


class WandbSink(Sink):
    """Logs from the driver only; every failure disables it after one warning."""

    critical = False

    def __init__(self, cfg: WandbConfig, sweep_id: str, sweep_dir: Path) -> None:
        self.cfg = cfg
        self.sweep_id = sweep_id
        self.sweep_dir = Path(sweep_dir)
        self.run: Any = None          # wandb.sdk.wandb_run.Run once started
        self.run_id = ""              # its id, kept after it finishes
        self.failed: str | None = None  # why the sink turned itself off
        self._table: Any = None
        self._unlogged = 0            # rows added to the table since its last log
        self._last_table_log = -math.inf
        self._metrics = RunningMetrics()
        self._cells: set[str] = set()
        self._rows = 0
        self._compact: list[dict] = []  # what the closing charts need, a few fields per row
        self._pending: tuple[int, dict] | None = None  # start()'s arguments until the first rows
        self._generations = GenerationTally()
        self._state = RunState(self.sweep_dir)
        self._recorded: list[dict] = []  # rows of earlier runs, until the run starts

    @property
    def active(self) -> bool:
        return self.run is not None and self.failed is None

    def _guard(self, what: str, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:
            self.failed = f"{type(e).__name__}: {e}".replace("\n", " ")
            logger.warning("W&B logging is off for the rest of the sweep (%s failed: %s); "
                           "results are still written to Parquet", what, self.failed)
            self._finish_quietly(exit_code=1)

    def start(self, total_cells: int, resolved_config: dict) -> None:
        """Kept until the first rows: a sweep that fails before any makes no run."""
        if self.cfg.mode != "disabled":
            self._pending = (total_cells, resolved_config)
            self._guard("resume", self._read_recorded)

    def _read_recorded(self) -> None:
        """The rows an earlier run recorded, read now: the first batch is in Parquet before the
        run starts and must not be counted twice."""
        if (self.sweep_dir / "evaluations").is_dir():
            self._recorded = read_rows(self.sweep_dir, "evaluations",
                                       skip=("cases", "stage_s", "error_msg"))

    def _ensure(self) -> bool:
        if self._pending is not None and self.run is None and self.failed is None:
            pending, self._pending = self._pending, None
            self._guard("init", self._init, *pending)
        return self.active

    def _init(self, total_cells: int, resolved_config: dict) -> None:
        import wandb  # lazy: only the driver, and only when W&B is on, needs it

        run_dir = Path(self.cfg.dir) if self.cfg.dir else self.sweep_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        args = init_args(self.cfg, self.sweep_id, resolved_config, run_dir)
        avoid_same_second(run_dir, args["id"])
        self.run = wandb.init(**args)
        self.run_id = self.run.id
        self._state.begin(self.run_id)
        self.run.define_metric("progress/cells_done")
        for pattern in ("progress/rows", "metrics/*", "generation/*"):
            self.run.define_metric(pattern, step_metric="progress/cells_done")
        self.run.summary["progress/total_cells"] = total_cells
        # allow_mixed_types: a column first seen as None then as float must not raise mid-sweep.
        self._table = wandb.Table(columns=TABLE_COLUMNS, log_mode="INCREMENTAL",
                                  allow_mixed_types=True)
        logger.info("W&B run %s (%s) in %s", self.run.id, self.cfg.mode, self.run.dir)
        self._resume()

    def _resume(self) -> None:
        """A resumed sweep's run starts from what Parquet already holds, so its metrics describe
        the whole sweep, not only the cells run since the resume (the table holds new rows only:
        the earlier run logged the others)."""
        rows, self._recorded = self._recorded, []
        if not rows:
            return
        self._rows += len(rows)
        self._cells.update(str(r.get("cell_id")) for r in rows)
        self._compact += [compact(r) for r in rows]
        payload: dict[str, Any] = self._metrics.update(rows)
        payload.update({"progress/cells_done": len(self._cells), "progress/rows": self._rows})
        self.run.summary["progress/resumed_cells"] = len(self._cells)
        self.run.summary["progress/total_cells"] += len(self._cells)  # start() counts the rest
        self._send(payload)
        logger.info("W&B metrics resume from %d recorded cells", len(self._cells))

    def write_generations(self, rows: list[dict]) -> None:
        if rows and self._ensure():
            self._guard("log", self._log_generations, rows)

    def _log_generations(self, rows: list[dict]) -> None:
        payload = self._generations.update(rows)
        payload["progress/cells_done"] = len(self._cells)
        self._send(payload)

    def write_metrics(self, values: dict[str, float]) -> None:
        """Gauges go to a run the rows started (they alone start none)."""
        if values and self.active:
            self._guard("log", self._send, {**values, "progress/cells_done": len(self._cells)})

    def write_evaluations(self, rows: list[dict]) -> None:
        if rows and self._ensure():
            self._guard("log", self._log, rows)

    def _log(self, rows: list[dict]) -> None:
        for row in rows:
            self._table.add_data(*[_cell(row.get(c)) for c in TABLE_COLUMNS])
            self._compact.append(compact(row))
        self._unlogged += len(rows)
        self._rows += len(rows)
        self._cells.update(str(r.get("cell_id")) for r in rows)
        payload: dict[str, Any] = self._metrics.update(rows)
        payload.update({"progress/cells_done": len(self._cells), "progress/rows": self._rows})
        if time.monotonic() - self._last_table_log >= self.cfg.table_log_interval_s:
            payload["evaluations"] = self._table
        self._send(payload)

    def _send(self, payload: dict[str, Any]) -> None:
        self.run.log(payload, step=self._state.next_step())
        if "evaluations" in payload:
            self._unlogged = 0
            self._last_table_log = time.monotonic()

    def close(self) -> None:
        if self.active:
            self._guard("close", self._close)

    def _close(self) -> None:
        if self._unlogged:
            self._send({"evaluations": self._table, "progress/cells_done": len(self._cells)})
        self.run.log(final_charts(self._compact), step=self._state.next_step())
        self.run.summary.update({"sweep_id": self.sweep_id, "progress/cells_done": len(self._cells),
                                 **self._metrics.flat(), **self._generations.flat()})
        if self.cfg.artifacts:
            log_artifacts(self.run, self.sweep_dir, self.run_id)
        run, self.run = self.run, None
        run.finish()

    def _finish_quietly(self, exit_code: int) -> None:
        run, self.run = self.run, None
        if run is not None:
            try:
                run.finish(exit_code=exit_code)
            except Exception:  # the run is already broken; its failure was reported once
                logger.debug("W&B finish after a failure also failed", exc_info=True)


@register("sink", "wandb", requires=("wandb",), options=WandbConfig)
def build(ctx: SinkContext) -> WandbSink | None:
    """Off with sink.wandb.mode=disabled."""
    cfg: WandbConfig = ctx.options
    return None if cfg.mode == "disabled" else WandbSink(cfg, ctx.sweep_id, ctx.sweep_dir)


def _cell(value: Any) -> Any:
    """Table cells: lists (flags) become comma-joined text, which the W&B UI filters well."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return value
