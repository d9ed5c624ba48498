"""The sink protocol: a no-op base class and a fan-out container (the torchtitan pattern).
More: kbx_ray/sinks/README.md, `base.py`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SinkContext:
    """What a sink factory builds from: the sweep's folder and id, and the sink's own options,
    typed by the dataclass it registered (`options=`; None without one)."""

    sweep_dir: Path
    sweep_id: str
    options: Any = None


class Sink:
    """Receives a sweep's rows. Every method is a no-op, so a sink overrides only what it uses."""

    critical: bool = False
    """True when the sweep must stop if this sink fails (the record); False for dashboards."""

    def start(self, total_cells: int, resolved_config: dict) -> None:
        """Called once, before any rows, with the number of cells to run and the full config."""

    def write_generations(self, rows: list[dict]) -> None:
        """One dict per LLM call (keys: parquet.GENERATION_SCHEMA)."""

    def write_evaluations(self, rows: list[dict]) -> None:
        """All evaluation rows of one or more complete cells (keys: parquet.EVALUATION_SCHEMA)."""

    def write_metrics(self, values: dict[str, float]) -> None:
        """Gauges the engine reads off its parts (LLM replicas' calls served), now and then."""

    def close(self) -> None:
        """Called once at the end of the sweep, also when it ends by an error."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def __enter__(self) -> Sink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class FanOut(Sink):
    """Calls every sink in order; disables a non-critical sink after its first failure.

    Order matters: the critical Parquet sink goes first, so a batch it failed to record is never
    shown on a dashboard.
    """

    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks: list[Sink] = list(sinks)  # the sinks still enabled
        self.disabled: dict[str, str] = {}  # sink name -> why it was disabled
        self.critical = any(s.critical for s in self.sinks)

    def _call(self, method: str, *args: object) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, method)(*args)
            except Exception as e:
                if sink.critical:
                    raise
                self._disable(sink, method, e)

    def _disable(self, sink: Sink, method: str, e: Exception) -> None:
        why = f"{type(e).__name__}: {e}".replace("\n", " ")
        logger.warning("sink %s failed in %s and is disabled for the rest of the sweep: %s",
                       sink.name, method, why)
        self.disabled[sink.name] = why
        self.sinks.remove(sink)

    def start(self, total_cells: int, resolved_config: dict) -> None:
        self._call("start", total_cells, resolved_config)

    def write_generations(self, rows: list[dict]) -> None:
        if rows:
            self._call("write_generations", rows)

    def write_evaluations(self, rows: list[dict]) -> None:
        if rows:
            self._call("write_evaluations", rows)

    def write_metrics(self, values: dict[str, float]) -> None:
        if values:
            self._call("write_metrics", values)

    def close(self) -> None:
        """Close every sink, even after a critical one raised; re-raise the first such error."""
        first: Exception | None = None
        for sink in list(self.sinks):
            try:
                sink.close()
            except Exception as e:
                if sink.critical:
                    first = first or e
                else:
                    self._disable(sink, "close", e)
        if first is not None:
            raise first
