"""The driver's batch writer: parts by count or age, a timer for the age, torn batches."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kbx_ray.records.genlog import GenerationLog
from kbx_ray.sinks import read_table
from kbx_ray.sinks.parquet import ParquetSink
from kbx_ray.records.writer import CellWriter as _Writer
from kbx_ray.records.writer import flush_when_due as _flush_when_due


class FailingEvaluations(ParquetSink):
    """A disk that fills between a batch's two parts."""

    fail = True

    def write_evaluations(self, rows: list[dict]) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        super().write_evaluations(rows)


def gen(cell: str, rnd: int) -> dict:
    return {"cell_id": cell, "round": rnd, "branch": 0, "completion": f"{cell}{rnd}"}


def ev(cell: str, rnd: int) -> dict:
    return {"cell_id": cell, "candidate_id": f"{cell}-{rnd}", "round": rnd}


def test_a_finished_cell_is_written_by_the_timer_without_a_next_cell(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    writer = _Writer(sink, GenerationLog(tmp_path), every=32, seconds=0.2)
    writer.add("c1", [gen("c1", 0)], [ev("c1", 0)])  # young: stays buffered
    assert read_table(tmp_path, "evaluations").empty

    async def main() -> list[BaseException]:
        errors: list[BaseException] = []
        task = asyncio.create_task(_flush_when_due(writer, 0.05, errors))
        deadline = time.monotonic() + 5
        while read_table(tmp_path, "evaluations").empty and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()
        return errors

    assert asyncio.run(main()) == []
    assert read_table(tmp_path, "evaluations").cell_id.tolist() == ["c1"]
    assert read_table(tmp_path, "generations").cell_id.tolist() == ["c1"]


def test_a_failed_evaluations_part_does_not_write_the_generations_twice(tmp_path: Path) -> None:
    sink = FailingEvaluations(tmp_path)
    writer = _Writer(sink, GenerationLog(tmp_path), every=1, seconds=60)
    with pytest.raises(OSError, match="No space left"):
        writer.add("c1", [gen("c1", 0), gen("c1", 1)], [ev("c1", 0), ev("c1", 1)])
    sink.fail = False
    writer.add("c2", [gen("c2", 0)], [ev("c2", 0)])  # the next batch carries c1's evaluations
    gens = read_table(tmp_path, "generations")
    assert sorted(zip(gens.cell_id, gens["round"])) == [("c1", 0), ("c1", 1), ("c2", 0)]
    assert sorted(read_table(tmp_path, "evaluations").candidate_id) == ["c1-0", "c1-1", "c2-0"]


def test_generation_rows_already_in_parquet_are_not_written_again(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    writer = _Writer(sink, GenerationLog(tmp_path), every=1, seconds=60,
                     written={("c1", 0, 0)})  # a torn batch of an earlier run wrote round 0
    writer.add("c1", [gen("c1", 0), gen("c1", 1)], [ev("c1", 0), ev("c1", 1)])
    gens = read_table(tmp_path, "generations")
    assert list(zip(gens.cell_id, gens["round"])) == [("c1", 1)]
