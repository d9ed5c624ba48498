"""FanOut: a broken dashboard is switched off after one warning; a broken record stops the sweep."""
from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.config.preflight import validate
from kbx_ray.sinks import (
    ConsoleSink, FanOut, ParquetSink, ParquetWriteError, Sink, WandbSink, build_sinks, read_table,
    sink_options,
)


class Recorder(Sink):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self, total_cells: int, resolved_config: dict) -> None:
        self.calls.append("start")

    def write_evaluations(self, rows: list[dict]) -> None:
        self.calls.append(f"eval:{len(rows)}")

    def close(self) -> None:
        self.calls.append("close")


class Flaky(Recorder):
    def write_evaluations(self, rows: list[dict]) -> None:
        self.calls.append("eval")
        raise ConnectionError("dashboard\nunreachable")


class Essential(Recorder):
    critical = True

    def close(self) -> None:
        raise RuntimeError("record not flushed")


def test_failing_sink_warns_once_and_is_disabled(caplog: pytest.LogCaptureFixture) -> None:
    flaky, rec = Flaky(), Recorder()
    fan = FanOut([flaky, rec])
    fan.start(3, {})
    for _ in range(3):
        fan.write_evaluations([{"cell_id": "c"}])
    fan.close()
    assert flaky.calls == ["start", "eval"]  # never called again, not even close
    assert rec.calls == ["start", "eval:1", "eval:1", "eval:1", "close"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert "Flaky" in msg and "ConnectionError: dashboard unreachable" in msg and "\n" not in msg
    assert fan.disabled == {"Flaky": "ConnectionError: dashboard unreachable"}


def test_parquet_failure_propagates_and_later_sinks_skip_the_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()
    fan = FanOut([ParquetSink(tmp_path), rec])
    fan.start(2, {})
    fan.write_evaluations([{"cell_id": "c1"}])

    def full(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(ParquetWriteError, match="free disk space"):
        fan.write_evaluations([{"cell_id": "c2"}])
    assert rec.calls == ["start", "eval:1"]  # the unrecorded batch was not shown
    assert read_table(tmp_path, "evaluations").cell_id.tolist() == ["c1"]


def test_close_reaches_every_sink_then_reraises_critical() -> None:
    essential, rec = Essential(), Recorder()
    fan = FanOut([essential, rec])
    with pytest.raises(RuntimeError, match="record not flushed"):
        with fan:
            fan.start(1, {})
    assert rec.calls == ["start", "close"]


def test_build_sinks_puts_parquet_first(tmp_path: Path) -> None:
    fan = build_sinks(tmp_path, "sw", sink_options(["wandb", "console"],
                                                   {"wandb": {"mode": "disabled"}}))
    assert [type(s) for s in fan.sinks] == [ParquetSink, ConsoleSink]
    assert fan.critical
    fan = build_sinks(tmp_path, "sw", sink_options(["wandb"], {"wandb": {"mode": "offline"}}))
    assert [type(s) for s in fan.sinks] == [ParquetSink, WandbSink]
    with pytest.raises(ValueError, match=r"^sink.wandb.mode='cloud' is not a choice"):
        sink_options(["wandb"], {"wandb": {"mode": "cloud"}})


def test_sinks_come_from_config_in_order_after_parquet_and_the_extra(tmp_path: Path) -> None:
    rec = Recorder()
    cfg = load_config(["sink.wandb.mode=disabled", "sinks=[console,parquet,wandb]"])
    fan = build_sinks(tmp_path, "sw", sink_options(cfg.sinks, cfg.sink), extra=[rec])
    assert [type(s) for s in fan.sinks] == [ParquetSink, Recorder, ConsoleSink]
    with pytest.raises(ConfigError, match=r"^unknown sink 'jsonl' in sinks=\['jsonl'\]: choose "
                       r"from console, parquet, wandb, or add kbx_ray/sinks/jsonl.py$"):
        validate(load_config(["sinks=[jsonl]"]))
