"""Whole cells -> the sinks, in batches: a Parquet part holds only complete cells.

A cell's rows are buffered until it completes, and written with others when enough cells or
enough time has gathered, so a killed driver leaves only whole cells (a re-run skips exactly
those). Written cells leave the generation log (genlog.py), which then holds only work in flight.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kbx_ray.records.genlog import GenerationLog


class CellWriter:
    """Buffers whole cells and writes them in batches (whichever of count or age comes first).

    A part is also at least `min_s` old: cells that finish by thousands a second (a replayed or
    noop sweep) would otherwise cost a Parquet part, with its fsyncs, every few milliseconds.
    """

    def __init__(self, sinks: Any, genlog: GenerationLog, every: int, seconds: float,
                 min_s: float = 0.0, written: set[tuple[str, int, int]] | None = None) -> None:
        self.sinks, self.genlog, self.every, self.seconds = sinks, genlog, every, seconds
        self.min_s = min_s
        # (cell, round, branch) of generation rows already in Parquet for cells without
        # evaluation rows: a run stopped between a batch's two parts wrote them
        self.written = written or set()
        self.gen: list[dict] = []
        self.ev: list[dict] = []
        self.cells: set[str] = set()
        self.last = time.monotonic()

    def add(self, cell_id: str, gens: list[dict], evals: list[dict]) -> None:
        self.gen += [g for g in gens if (cell_id, g["round"], g["branch"]) not in self.written]
        self.ev += evals
        self.cells.add(cell_id)
        age = time.monotonic() - self.last
        if age > self.seconds or (len(self.cells) >= self.every and age >= self.min_s):
            self.flush()

    def due(self) -> bool:
        """Buffered cells older than the age limit (checked by a timer, not only by `add`)."""
        return bool(self.cells) and time.monotonic() - self.last > self.seconds

    def flush(self) -> None:
        if self.gen:
            self.sinks.write_generations(self.gen)
            self.gen = []  # written: a failed evaluations part must not write them again
        if self.ev:
            self.sinks.write_evaluations(self.ev)
        self.genlog.forget(self.cells)
        self.gen, self.ev, self.cells, self.last = [], [], set(), time.monotonic()


async def flush_when_due(writer: CellWriter, period: float, errors: list[BaseException]) -> None:
    """Cells that finish long before the next one (slow repair chains) are written within about
    `flush_s`, not when the next cell completes: a driver killed meanwhile would lose them."""
    while not errors:
        await asyncio.sleep(period)
        if writer.due():
            try:
                writer.flush()
            except BaseException as e:  # noqa: BLE001 - the workers stop on it, as on their own
                errors.append(e)
                return
