"""Rows -> Parquet part files: the sweep's record, and the source of resume and of the report.
More: kbx_ray/sinks/README.md, `parquet.py`.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import time
from pathlib import Path
from typing import Literal

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kbx_ray.registry import register
from kbx_ray.sinks.base import Sink, SinkContext

logger = logging.getLogger(__name__)

Dataset = Literal["generations", "evaluations"]

GENERATION_SCHEMA = pa.schema([
    ("schema_version", pa.int32()), ("sweep_id", pa.string()), ("cell_id", pa.string()),
    ("task_id", pa.string()), ("method", pa.string()), ("model", pa.string()),
    ("sample", pa.int32()), ("round", pa.int32()),
    ("branch", pa.int32()),               # candidate index within a round (workers, samples)
    ("prompt", pa.string()),              # JSON of the chat messages
    ("completion", pa.string()),
    ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
    ("latency_s", pa.float64()), ("finish_reason", pa.string()),
    ("candidate_id", pa.string()),
    ("created_at", pa.float64()),         # unix seconds
])

EVALUATION_SCHEMA = pa.schema([
    ("schema_version", pa.int32()), ("sweep_id", pa.string()), ("cell_id", pa.string()),
    ("candidate_id", pa.string()), ("task_id", pa.string()), ("task_hash", pa.string()),
    ("category", pa.string()), ("level", pa.int32()), ("method", pa.string()),
    ("model", pa.string()), ("sample", pa.int32()), ("round", pa.int32()),
    ("branch", pa.int32()),               # candidate index within a round (workers, samples)
    ("parent_candidate_id", pa.string()),
    ("stop_reason", pa.string()),         # on a chain's last row: correct | fast | max_rounds
    ("hardware", pa.string()),            # the pool name
    ("gpu_name", pa.string()), ("driver", pa.string()), ("torch_version", pa.string()),
    ("triton_version", pa.string()), ("device", pa.string()),
    ("node_id", pa.string()),             # the Ray node the evaluator ran on
    ("node_accelerator", pa.string()),    # that node's accelerator_type resource ("" for none)
    ("stage", pa.string()), ("call_ok", pa.bool_()), ("exec_ok", pa.bool_()),
    ("error_kind", pa.string()), ("error_msg", pa.string()),
    ("flags", pa.list_(pa.string())), ("timing_skipped", pa.string()),
    ("cases", pa.string()),               # JSON list of per-case dicts (types.CaseResult)
    ("speedup", pa.float64()), ("sol_fraction", pa.float64()),
    ("eval_wall_s", pa.float64()), ("started_at", pa.float64()), ("finished_at", pa.float64()),
    ("final", pa.bool_()),                # the row is the cell's final answer
    ("stage_s", pa.string()),             # JSON: seconds per evaluation stage (profiling), and
    #                                       aot_kernels: kernels compiled ahead and seeded
    ("peer_verdict", pa.string()),        # replayed kernels: the peer harness's verdict, if given
    ("stricter_reason", pa.string()),     # why we fail what the peer's check would not (suites/peer)
    ("seeds", pa.list_(pa.int64())),      # every input seed the evaluation drew (secret, per run)
    ("unseen_cases", pa.string()),        # JSON: the cases drawn from the task's shape family
    # a study's corpus kernel (llm/replay_corpus.py): the study's round and verdicts of it
    ("peer_round", pa.int32()), ("peer_call_ok", pa.bool_()), ("peer_exec_ok", pa.bool_()),
    ("peer_perf_ok", pa.bool_()), ("peer_speedup", pa.float64()),
    ("peer_error", pa.string()),          # the last line of the study's error
    ("peer_source", pa.string()),         # the record it came from: "<file>:<line> <field>"
    ("peer_skip", pa.string()),           # why the published text was not judged
])

SCHEMAS: dict[str, pa.Schema] = {"generations": GENERATION_SCHEMA, "evaluations": EVALUATION_SCHEMA}
# stored as JSON text; lists and dicts are encoded
JSON_COLUMNS = frozenset({"prompt", "cases", "stage_s", "unseen_cases"})
_PANDAS_TYPES = {pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype(),
                 pa.bool_(): pd.BooleanDtype()}  # keep ints and bools typed when they hold nulls


class ParquetWriteError(OSError):
    """A part could not be written. Earlier parts are intact; re-running resumes from them."""


def rows_to_table(rows: list[dict], dataset: Dataset) -> pa.Table:
    """A typed table: missing keys become nulls; unknown keys and bad types raise ValueError."""
    schema = SCHEMAS[dataset]
    unknown = sorted(set().union(*rows) - set(schema.names))
    if unknown:
        raise ValueError(f"{dataset} rows have unknown keys {unknown}; "
                         f"add them to {dataset.upper()[:-1]}_SCHEMA in kbx_ray/sinks/parquet.py")
    if any(not isinstance(row.get(c), (str, type(None))) for row in rows for c in JSON_COLUMNS):
        rows = [{**row, **{c: _encode(row.get(c), c) for c in JSON_COLUMNS if c in row}}
                for row in rows]
    try:
        return pa.Table.from_pylist(rows, schema=schema)  # the same columns, built in Cython
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        pass  # find the column to name, below
    arrays = []
    for f in schema:
        values = [_encode(row.get(f.name), f.name) for row in rows]
        try:
            arrays.append(pa.array(values, type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise ValueError(f"{dataset} column {f.name!r} expects {f.type}: {e}") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def _encode(value: object, column: str) -> object:
    if column in JSON_COLUMNS and value is not None and not isinstance(value, str):
        return json.dumps(value, default=str)
    return value


class ParquetSink(Sink):
    """Writes each batch as one atomic part file. Critical: if it fails, the sweep stops."""

    critical = True

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = Path(sweep_dir)
        self._seq = 0

    def start(self, total_cells: int, resolved_config: dict) -> None:
        for name in SCHEMAS:
            path = self.sweep_dir / name
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise _write_error(path, e) from e

    def write_generations(self, rows: list[dict]) -> None:
        if rows:
            self._write_part("generations", rows_to_table(rows, "generations"))

    def write_evaluations(self, rows: list[dict]) -> None:
        if rows:
            self._write_part("evaluations", rows_to_table(rows, "evaluations"))

    def _write_part(self, dataset: Dataset, table: pa.Table) -> Path:
        directory = self.sweep_dir / dataset
        self._seq += 1
        stem = f"part-{time.time_ns()}-{self._seq:06d}"
        tmp, final = directory / f".{stem}.tmp", directory / f"{stem}.parquet"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, tmp, compression="zstd")
            _fsync(tmp)
            os.replace(tmp, final)
            _fsync(directory)
        except OSError as e:
            _unlink_quietly(tmp)
            raise _write_error(final, e) from e
        return final


@register("sink", "parquet")
def build(ctx: SinkContext) -> ParquetSink:
    """Always the first sink of a sweep (sinks.build_sinks): the record it resumes from."""
    return ParquetSink(ctx.sweep_dir)


def _write_error(path: Path, e: OSError) -> ParquetWriteError:
    reason = (e.strerror or str(e) or type(e).__name__).replace("\n", " ")
    disk_full = e.errno in (errno.ENOSPC, errno.EDQUOT) or "space left" in reason.lower()
    fix = ("free disk space and re-run: completed cells are kept" if disk_full
           else "fix the path or its permissions and re-run: completed cells are kept")
    return ParquetWriteError(e.errno or errno.EIO, f"cannot write {path}: {reason}; {fix}")


def _fsync(path: Path) -> None:
    """Flush to disk, so a power cut after the rename cannot leave an empty part."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:
        if path.is_dir():  # some platforms cannot open a directory; the rename is still atomic
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        logger.debug("could not remove %s", path)


def clean_tmp(sweep_dir: Path) -> int:
    """Delete the `.tmp` leftovers of killed writes. Call it only while no sink is writing."""
    removed = 0
    for name in SCHEMAS:
        for tmp in (Path(sweep_dir) / name).glob(".*.tmp"):
            _unlink_quietly(tmp)
            removed += 1
    if removed:
        logger.info("removed %d unfinished part file(s) under %s", removed, sweep_dir)
    return removed


def _read_arrow(sweep_dir: Path, dataset: Dataset, columns: list[str] | None = None) -> pa.Table:
    schema = SCHEMAS[dataset]
    directory = Path(sweep_dir) / dataset
    if not directory.is_dir():
        return schema.empty_table() if columns is None else schema.empty_table().select(columns)
    # The dataset API skips files starting with "." or "_", so in-flight .tmp parts are invisible;
    # the explicit schema fills columns that older parts lack with nulls.
    data = ds.dataset(directory, format="parquet", schema=schema)
    return data.to_table(columns=columns)


def read_table(sweep_dir: Path, dataset: Dataset) -> pd.DataFrame:
    """One dataset as a DataFrame; empty, with the schema's columns, when nothing was written."""
    if dataset not in SCHEMAS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(SCHEMAS)}")
    return _read_arrow(sweep_dir, dataset).to_pandas(types_mapper=_PANDAS_TYPES.get)


def read_rows(sweep_dir: Path, dataset: Dataset, skip: tuple[str, ...] = ()) -> list[dict]:
    """One dataset as plain dicts (None for nulls), without the columns in `skip`."""
    columns = [c for c in SCHEMAS[dataset].names if c not in skip]
    return _read_arrow(sweep_dir, dataset, columns).to_pylist()


def written_generations(sweep_dir: Path, done: set[str]) -> set[tuple[str, int, int]]:
    """(cell_id, round, branch) of the generation rows of cells not in `done`: parts that a run
    stopped between a batch's generations and evaluations parts left behind."""
    t = _read_arrow(sweep_dir, "generations", ["cell_id", "round", "branch"]).to_pydict()
    return {(c, int(r or 0), int(b or 0)) for c, r, b in zip(t["cell_id"], t["round"], t["branch"])
            if c is not None and c not in done}


def done_cells(sweep_dir: Path) -> set[str]:
    """cell_ids that have evaluation rows, i.e. are complete. Read-only: a `--dry-run` may ask
    while a sweep writes there (in-flight `.tmp` parts are invisible to the reader)."""
    ids = _read_arrow(sweep_dir, "evaluations", ["cell_id"]).column("cell_id").to_pylist()
    return {i for i in ids if i is not None}

