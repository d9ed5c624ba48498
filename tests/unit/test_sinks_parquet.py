"""ParquetSink on real files: typed round trip, one atomic part per write, resume, disk full."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from kbx_ray.sinks.parquet import (
    EVALUATION_SCHEMA, GENERATION_SCHEMA, ParquetSink, ParquetWriteError, clean_tmp, done_cells,
    read_rows, read_table, written_generations,
)


def eval_row(cell: str, cand: str, **over: object) -> dict:
    row = dict(schema_version=1, sweep_id="s", cell_id=cell, candidate_id=cand,
               task_id="activation/relu", category="Activation", level=1, method="one_shot",
               model="m", sample=0, round=0, hardware="cpu", stage="done", call_ok=True,
               exec_ok=True, flags=["torch_compute"], speedup=1.5, sol_fraction=0.25, final=True)
    row.update(over)
    return row


def gen_row(cell: str, rnd: int, **over: object) -> dict:
    row = dict(schema_version=1, sweep_id="s", cell_id=cell, task_id="t", method="repair",
               model="m", sample=0, round=rnd, prompt=[{"role": "user", "content": "hi"}],
               completion=f"c{rnd}", prompt_tokens=3, completion_tokens=5, latency_s=0.1,
               finish_reason="stop", candidate_id=f"k{rnd}", created_at=1000.0 + rnd)
    row.update(over)
    return row


def parts(d: Path) -> list[Path]:
    return sorted(d.glob("part-*.parquet"))


def test_round_trip_keeps_types_when_columns_are_all_null(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.start(2, {})
    # Every optional column missing or None: the part must still carry the schema's types.
    sink.write_evaluations([{"cell_id": "c1", "candidate_id": "k1", "speedup": None}])
    sink.write_evaluations([eval_row("c2", "k2", cases=[{"case": "a", "ok": True}])])
    files = parts(tmp_path / "evaluations")
    assert len(files) == 2
    assert pq.read_schema(files[0]).remove_metadata() == EVALUATION_SCHEMA

    df = read_table(tmp_path, "evaluations")
    assert list(df.columns) == EVALUATION_SCHEMA.names
    first, second = df.iloc[0], df.iloc[1]
    assert first.cell_id == "c1" and pd.isna(first.speedup) and first.level is pd.NA
    assert first.exec_ok is pd.NA and first["flags"] is None
    assert str(df["level"].dtype) == "Int32" and str(df["exec_ok"].dtype) == "boolean"
    assert second.level == 1 and bool(second.exec_ok) and second.speedup == 1.5
    assert list(second["flags"]) == ["torch_compute"]
    assert second.cases == '[{"case": "a", "ok": true}]'  # lists are stored as JSON text


def test_unknown_keys_and_bad_types_name_the_problem(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match=r"unknown keys \['bogus', 'zz'\]"):
        sink.write_evaluations([eval_row("c", "k", bogus=1, zz=2)])
    with pytest.raises(ValueError, match="column 'level'"):
        sink.write_evaluations([eval_row("c", "k", level="one")])
    assert parts(tmp_path / "evaluations") == []


def test_each_write_is_one_part_and_leaves_no_tmp(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write_generations([gen_row("c1", 0), gen_row("c1", 1)])
    sink.write_generations([gen_row("c2", 0)])
    sink.write_generations([])  # nothing to record: no empty part
    files = parts(tmp_path / "generations")
    assert [f.name.split("-")[0] for f in files] == ["part", "part"]
    assert not list((tmp_path / "generations").glob(".*"))
    df = read_table(tmp_path, "generations")
    assert list(df.columns) == GENERATION_SCHEMA.names
    assert sorted(df.cell_id) == ["c1", "c1", "c2"]
    assert read_table(tmp_path, "evaluations").empty  # absent dataset: empty, typed columns
    assert list(read_table(tmp_path / "nope", "evaluations").columns) == EVALUATION_SCHEMA.names


def test_done_cells_ignores_tmp_leftovers_and_only_a_run_removes_them(tmp_path: Path) -> None:
    """done_cells is read-only (a --dry-run may ask while a sweep writes there, and must not delete
    that sweep's in-flight part); the run that takes the folder over cleans up."""
    sink = ParquetSink(tmp_path)
    sink.write_evaluations([eval_row("c1", "k1", final=False), eval_row("c1", "k2")])
    sink.write_evaluations([eval_row("c2", "k3")])
    torn = tmp_path / "evaluations" / ".part-1-000009.tmp"
    torn.write_bytes(b"PAR1 half a file")  # what a kill -9 mid-write leaves
    assert len(read_table(tmp_path, "evaluations")) == 3  # readers skip it
    assert done_cells(tmp_path) == {"c1", "c2"}
    assert torn.exists()
    assert clean_tmp(tmp_path) == 1 and not torn.exists()
    assert done_cells(tmp_path / "missing") == set()


def test_generations_for_resume_only_unfinished_cells_in_call_order(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write_generations([gen_row("done", 0), gen_row("open", 2)])
    sink.write_generations([gen_row("open", 0), gen_row("open", 1)])
    sink.write_evaluations([eval_row("done", "k0")])
    # what the engine's resume reads: the calls already in Parquet of the cells not done
    written = written_generations(tmp_path, done_cells(tmp_path))
    assert {c for c, _, _ in written} == {"open"}
    assert sorted(r for _, r, _ in written) == [0, 1, 2]
    rows = sorted((r for r in read_rows(tmp_path, "generations") if r["cell_id"] == "open"),
                  key=lambda r: r["created_at"])  # call order
    assert [r["round"] for r in rows] == [0, 1, 2]
    assert rows[0]["prompt"] == '[{"role": "user", "content": "hi"}]'
    assert rows[0]["prompt_tokens"] == 3


def test_disk_full_raises_one_line_and_keeps_earlier_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = ParquetSink(tmp_path)
    sink.write_evaluations([eval_row("c1", "k1")])

    def full_disk(table: object, where: object, **kw: object) -> None:
        Path(str(where)).write_bytes(b"PAR1 torn")  # a partial write, then the error
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)
    with pytest.raises(ParquetWriteError) as info:
        sink.write_evaluations([eval_row("c2", "k2")])
    msg = str(info.value)
    assert isinstance(info.value, OSError) and "\n" not in msg
    assert str(tmp_path / "evaluations") in msg and "No space left on device" in msg
    assert "free disk space and re-run: completed cells are kept" in msg
    monkeypatch.undo()

    assert not list((tmp_path / "evaluations").glob(".*"))  # the torn tmp was removed
    assert read_table(tmp_path, "evaluations").cell_id.tolist() == ["c1"]
    assert done_cells(tmp_path) == {"c1"}
    sink.write_evaluations([eval_row("c2", "k2")])  # space freed: the same sink carries on
    assert done_cells(tmp_path) == {"c1", "c2"}


@pytest.mark.slow  # starts a writer process, killed
def test_kill_9_mid_write_leaves_only_whole_parts(tmp_path: Path) -> None:
    """A real writer is SIGKILLed halfway through writing its third part's bytes."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        import pyarrow as pa, pyarrow.parquet as pq
        from kbx_ray.sinks.parquet import ParquetSink

        real_write = pq.write_table
        def dies_halfway(table, where, **kw):
            sink_buf = pa.BufferOutputStream()
            real_write(table, sink_buf, **kw)
            data = sink_buf.getvalue().to_pybytes()
            with open(where, "wb") as f:
                f.write(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)

        sink = ParquetSink(Path({str(tmp_path)!r}))
        for i in range(3):
            if i == 2:
                pq.write_table = dies_halfway
            sink.write_evaluations([dict(cell_id=f"c{{i}}", candidate_id=f"k{{j}}")
                                    for j in range(10)])
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert len(parts(tmp_path / "evaluations")) == 2
    assert len(list((tmp_path / "evaluations").glob(".*.tmp"))) == 1
    counts = read_table(tmp_path, "evaluations").cell_id.value_counts().to_dict()
    assert counts == {"c0": 10, "c1": 10}
    assert done_cells(tmp_path) == {"c0", "c1"}
    assert clean_tmp(tmp_path) == 1
    assert not list((tmp_path / "evaluations").glob(".*.tmp"))
