"""WandbSink against a real offline run, read back from disk; and W&B failures never escape.

How an offline run is read back (checked with wandb 0.31):
- `wandb leet inspect --json <run dir>` prints one JSON object per record of the run's .wandb log:
  header, run (name, job_type, group, config), metric (each define_metric), history, summary,
  files, artifact, exit. A history record's `item` holds the logged scalars under their keys and,
  for a table, only a reference: `evaluations.path` (media/table/evaluations_<n>_<sha>.table.json),
  `evaluations.increment_num`, and `evaluations.nrows`, which counts ALL rows logged so far.
- It does not show table contents. Those are in the files that `path` names, under the run's
  `files/` dir, as {"columns": [...], "data": [[...], ...]}; with log_mode="INCREMENTAL" each file
  holds only that increment's new rows. So the test follows the history records to the files and
  compares the rows one for one with what was written.
- `wandb leet inspect --summary --json <run dir>` prints one object: state, name, config, summary.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kbx_ray.sinks import FanOut, ParquetSink, WandbSink, read_table
from kbx_ray.sinks.wandb_settings import WandbConfig


@pytest.fixture(autouse=True)
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every byte W&B writes (runs, artifact staging, settings) inside tmp_path."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_ARTIFACT_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc key from the developer
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def eval_row(i: int, category: str, method: str, exec_ok: bool, speedup: float | None,
             rnd: int = 0, final: bool = True) -> dict:
    return dict(schema_version=1, sweep_id="sw", cell_id=f"cell{i}", candidate_id=f"cand{i}.{rnd}",
                task_id=f"{category.lower()}/t{i}", category=category, level=1, method=method,
                model="org/coder-1.5b", sample=0, round=rnd, hardware="cpu", stage="done",
                call_ok=True, exec_ok=exec_ok, flags=["a", "b"] if i % 2 else [],
                cases='[{"case": "small"}]', speedup=speedup, sol_fraction=None, final=final)


BATCHES = [
    [eval_row(0, "Activation", "one_shot", True, 2.0),
     eval_row(1, "Activation", "one_shot", False, None)],
    [eval_row(2, "Reduce", "repair", True, 0.5)],
    [eval_row(3, "Activation", "repair", False, None, rnd=0, final=False),  # a repaired round
     eval_row(3, "Activation", "repair", True, 8.0, rnd=1),
     eval_row(4, "Reduce", "one_shot", False, None)],
]


def leet(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", *args],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def test_offline_run_holds_every_row_and_the_metrics(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "results" / "sw"
    sink = WandbSink(WandbConfig(mode="offline", group="study", table_log_interval_s=0),
                     "sw", sweep_dir)
    fan = FanOut([ParquetSink(sweep_dir), sink])
    fan.start(5, {"sweep": {"name": "sw"}, "seed": 0})
    for batch in BATCHES:
        fan.write_evaluations(batch)
    fan.close()
    assert sink.failed is None and fan.disabled == {}

    (run_dir,) = (sweep_dir / "wandb").glob("offline-run-*")  # dir defaults to the sweep dir
    records = [json.loads(line) for line in leet("--json", str(run_dir)).splitlines()]
    (run,) = [r["run"] for r in records if r["type"] == "run"]
    assert run["display_name"] == "sw" and run["job_type"] == "sweep"
    assert run["run_group"] == "study" and run["config"]["update"]["seed"] == 0
    history = [r["history"]["item"] for r in records if r["type"] == "history"]

    logged = []
    for item in history:
        if "evaluations.path" in item:
            table = json.loads((run_dir / "files" / item["evaluations.path"]).read_text())
            cols = table["columns"]
            logged += [dict(zip(cols, values)) for values in table["data"]]
            assert item["evaluations.nrows"] == len(logged)
    assert "cases" not in cols and "cell_id" in cols
    written = read_table(sweep_dir, "evaluations")  # what Parquet recorded, the same batches
    key = ("cell_id", "candidate_id", "exec_ok")
    assert Counter(tuple(r[k] for k in key) for r in logged) == Counter(
        tuple(bool(v) if k == "exec_ok" else v for k, v in zip(key, t))
        for t in written[list(key)].itertuples(index=False))
    assert len(logged) == len(written) == 6
    assert {r["flags"] for r in logged} == {"a,b", ""}

    steps = [h for h in history if "metrics/overall/fast_1p5" in h]  # not the closing charts
    last = steps[-1]
    assert last["progress/cells_done"] == 5
    assert last["metrics/category/Activation/exec_rate"] == pytest.approx(2 / 3)
    assert last["metrics/category/Activation/geomean_speedup"] == pytest.approx(4.0)
    assert last["metrics/method/repair/fast_1"] == pytest.approx(0.5)
    assert last["metrics/model/org_coder-1.5b/call_rate"] == 1.0  # '/' in a value is escaped
    assert last["metrics/overall/fast_1p5"] == pytest.approx(2 / 5)
    assert steps[-2]["metrics/overall/fast_1p5"] == pytest.approx(1 / 3)

    summary = json.loads(leet("--summary", "--json", str(run_dir)))
    assert summary["state"] == "finished" and summary["name"] == "sw"
    assert summary["summary"]["progress/cells_done"] == 5


def test_a_resumed_sweeps_run_counts_the_cells_recorded_before(tmp_path: Path) -> None:
    """The run of a resumed sweep is the same W&B run (id from the sweep id), seeds its metrics
    from Parquet (its dashboard describes the whole sweep) and logs after the earlier run's last
    step (W&B drops history at steps it already holds)."""
    sweep_dir = tmp_path / "results" / "sw"
    runs = []
    for batch, todo in ((BATCHES[0], 3), (BATCHES[1], 1)):  # stopped after cells 0-1, resumed
        sink = WandbSink(WandbConfig(mode="offline", table_log_interval_s=0), "sw", sweep_dir)
        fan = FanOut([ParquetSink(sweep_dir), sink])
        fan.start(todo, {})
        fan.write_evaluations(batch)
        fan.close()
        assert sink.failed is None
        runs.append(sink)
    assert runs[0].run_id == runs[1].run_id == "sw"
    first, second = sorted((sweep_dir / "wandb").glob("offline-run-*-sw"))  # one id, two parts
    records = [json.loads(line) for line in leet("--json", str(second)).splitlines()]
    (run,) = [r["run"] for r in records if r["type"] == "run"]
    assert run["run_id"] == "sw" and run["resume"] is True
    earlier = [r["history"]["step"].get("num", 0) for r in (
        json.loads(line) for line in leet("--json", str(first)).splitlines())
        if r["type"] == "history"]
    history = [r["history"] for r in records if r["type"] == "history"]
    assert min(h["step"]["num"] for h in history) == max(earlier) + 1
    steps = [h["item"] for h in history if "metrics/overall/exec_rate" in h["item"]]
    assert steps[0]["progress/cells_done"] == 2  # the recorded cells, logged at the start
    assert steps[-1]["progress/cells_done"] == 3
    assert steps[-1]["metrics/overall/exec_rate"] == pytest.approx(2 / 3)  # cells 0, 2 of 0-2
    summary = json.loads(leet("--summary", "--json", str(second)))["summary"]
    assert summary["progress/resumed_cells"] == 2 and summary["progress/total_cells"] == 3


def test_disabled_mode_makes_no_run(tmp_path: Path) -> None:
    sink = WandbSink(WandbConfig(mode="disabled"), "sw", tmp_path)
    sink.start(1, {})
    sink.write_evaluations(BATCHES[0])
    sink.close()
    assert sink.run is None and not (tmp_path / "wandb").exists()


def test_unreachable_server_without_key_does_not_raise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    sink = WandbSink(WandbConfig(mode="online"), "sw", tmp_path)
    fan = FanOut([ParquetSink(tmp_path), sink])
    fan.start(1, {})
    fan.write_evaluations(BATCHES[0])
    fan.close()
    assert sink.failed is not None and sink.run is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "W&B logging is off" in warnings[0]
    assert len(read_table(tmp_path, "evaluations")) == 2  # the record is unaffected


def test_wandb_not_importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # what `import wandb` sees when not installed
    sink = WandbSink(WandbConfig(mode="offline"), "sw", tmp_path)
    sink.start(1, {})
    sink.write_evaluations(BATCHES[0])
    sink.close()
    assert sink.failed is not None and sink.failed.startswith(("ImportError", "ModuleNotFound"))


def test_log_failure_mid_sweep_disables_and_finishes_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = WandbSink(WandbConfig(mode="offline", table_log_interval_s=0), "sw", tmp_path)
    sink.start(3, {})
    sink.write_evaluations(BATCHES[0])
    run = sink.run

    def broken(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run, "log", broken)
    sink.write_evaluations(BATCHES[1])  # must not raise
    sink.write_evaluations(BATCHES[2])
    sink.close()
    assert sink.failed is not None and "No space left" in sink.failed and sink.run is None
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert json.loads(leet("--summary", "--json", str(run_dir)))["exit_code"] == 1


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in leet("--json", str(run_dir)).splitlines()]


def _table_rows(run_dir: Path, records: list[dict]) -> list[dict]:
    logged = []
    for item in (r["history"]["item"] for r in records if r["type"] == "history"):
        if "evaluations.path" in item:
            table = json.loads((run_dir / "files" / item["evaluations.path"]).read_text())
            logged += [dict(zip(table["columns"], v)) for v in table["data"]]
    return logged


def test_real_sweep_and_resume_one_run_with_artifacts_and_provenance(tmp_path: Path) -> None:
    """A real CPU sweep (scripts/sweep.py) with sink.wandb.mode=offline, then its resume with one more
    task: both parts are one W&B run; their table rows equal the Parquet rows one for one; each
    part holds the results and report artifacts and a flat summary; config.yaml and run.json
    record what ran, one run.json entry per run; the committed workspace names only logged keys."""
    import os
    import re

    root = Path(__file__).resolve().parents[2]
    runs = []
    for include in ("[activation/relu]", "[activation/relu,math/exp]"):
        args = [f"output_dir={tmp_path / 'results'}", f"suite.include={include}",
                "sink.wandb.mode=offline", "sink.wandb.group=ci", "sink.wandb.table_log_interval_s=0"]
        sweep = subprocess.run([sys.executable, str(root / "scripts/sweep.py"), *args], cwd=root,
                               capture_output=True, text=True, timeout=900, env=dict(os.environ))
        assert sweep.returncode == 0, sweep.stderr[-2000:]
        runs.append(args)
    (sweep_dir,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    sid = sweep_dir.name
    assert sid.startswith("one_shot-reference-kbx-")
    parts = sorted((sweep_dir / "wandb").glob(f"offline-run-*-{sid}"))
    assert len(parts) == 2  # one W&B run id for the sweep and its resume

    logged = []
    for i, run_dir in enumerate(parts):
        records = _records(run_dir)
        (run,) = [r["run"] for r in records if r["type"] == "run"]
        assert run["run_id"] == sid and run["display_name"] == sid and run["run_group"] == "ci"
        assert set(run["tags"]) >= {"method:one_shot", "model:reference", "suite:kbx", "pool:cpu"}
        config = run["config"]["update"]
        assert config["variants"]["methods"][0]["name"] == "one_shot"
        logged += _table_rows(run_dir, records)
        names = {(r["artifact"]["type"], r["artifact"]["name"]) for r in records
                 if r["type"] == "artifact"}
        assert {("results", f"results-{sid}"), ("report", f"report-{sid}")} <= names, names
        summary = json.loads(leet("--summary", "--json", str(run_dir)))["summary"]
        ours = {k: v for k, v in summary.items() if k.startswith(("metrics/", "generation/"))}
        assert ours and all(isinstance(v, (int, float)) for v in ours.values()), ours
        assert summary["progress/cells_done"] == i + 1
        assert summary["metrics/overall/exec_rate"] == 1.0
        assert summary["generation/reference/calls"] == 1  # this run's LLM calls
    written = read_table(sweep_dir, "evaluations")
    key = ("cell_id", "candidate_id", "task_id", "exec_ok")
    assert len(logged) == len(written) == 2
    assert Counter(tuple(r[k] for k in key) for r in logged) == Counter(
        tuple(bool(v) if k == "exec_ok" else v for k, v in zip(key, t))
        for t in written[list(key)].itertuples(index=False))

    # provenance beside the data, one run.json entry per run
    import yaml

    config = yaml.safe_load((sweep_dir / "config.yaml").read_text())
    assert config["suite"]["include"] == ["activation/relu", "math/exp"]
    assert config["variants"]["models"][0]["backend"] == "reference" and config["pools"] == ["cpu"]
    entries = json.loads((sweep_dir / "run.json").read_text())["runs"]
    assert [e["command"][2:] for e in entries] == runs
    for e, cells in zip(entries, (1, 1)):
        assert e["state"] == "finished" and e["cells_written"] == cells == e["cells_to_run"]
        assert re.fullmatch(r"[0-9a-f]{40}", e["git"]["commit"]) and isinstance(e["git"]["dirty"],
                                                                                 bool)
        assert {"python", "torch", "triton", "ray", "vllm"} <= set(e["versions"])
        assert e["versions"]["torch"] and e["ray_nodes"] and e["ray_nodes"][0]["host"]
        assert e["pools"]["cpu"]["device"] == ["cpu"] and e["pools"]["cpu"]["torch_version"]
    report = (sweep_dir / "report" / "report.md").read_text()
    assert "## What ran" in report and entries[1]["git"]["commit"][:12] in report



def test_closing_charts_are_logged(tmp_path: Path) -> None:
    """The ready-made dashboard: a bar, a repair-round line and a speedup histogram."""
    sweep_dir = tmp_path / "results" / "sw"
    sink = WandbSink(WandbConfig(mode="offline", table_log_interval_s=0), "sw", sweep_dir)
    sink.start(5, {})
    for batch in BATCHES:
        sink.write_evaluations(batch)
    sink.close()
    assert sink.failed is None
    (run_dir,) = (sweep_dir / "wandb").glob("offline-run-*")
    records = [json.loads(line) for line in leet("--json", str(run_dir)).splitlines()]
    keys = {k for r in records if r["type"] == "history" for k in r["history"]["item"]}
    for chart in ("charts/exec_rate_by_category", "charts/repair_curve", "charts/speedup_log2"):
        assert any(k.startswith(chart) for k in keys), sorted(keys)


def test_generation_metrics_and_the_committed_workspace(tmp_path: Path) -> None:
    """Generation metrics per model and per replica reach the run; kbx_ray/sinks/wandb_workspace.py
    pins panels by key: each exact key is one the sink logs, each pattern matches a logged key, so
    a renamed metric cannot leave an empty panel."""
    import re

    from kbx_ray.sinks.wandb_workspace import SPEC, X, build

    sweep_dir = tmp_path / "results" / "sw"
    sink = WandbSink(WandbConfig(mode="offline", table_log_interval_s=0, artifacts=False), "sw",
                     sweep_dir)
    sink.start(5, {})
    sink.write_generations([{"model": "org/coder-1.5b", "prompt_tokens": 10,
                             "completion_tokens": 30, "latency_s": 0.5, "finish_reason": "length"},
                            {"model": "org/coder-1.5b", "prompt_tokens": 10,
                             "completion_tokens": 10, "latency_s": 0.5, "finish_reason": "stop"}])
    for batch in BATCHES:
        sink.write_evaluations(batch)
    from types import SimpleNamespace

    from kbx_ray.llm.replica_group import ReplicaGroup
    from kbx_ray.sinks.wandb_runs import replica_gauges

    group = ReplicaGroup([object(), object()], cap=4)  # two replicas, as a vllm backend holds them
    group.served, group.peak = [5, 3], [4, 2]
    from kbx_ray.types import Generation

    group.gen[1].add([Generation("a", completion_tokens=30, latency_s=0.5, finish_reason="length"),
                     Generation("b", completion_tokens=10, latency_s=1.5)])
    sink.write_metrics(replica_gauges([SimpleNamespace(name="org/coder-1.5b", replicas=group)]))
    sink.close()
    assert sink.failed is None
    (run_dir,) = (sweep_dir / "wandb").glob("offline-run-*")
    records = _records(run_dir)
    keys = {k for r in records if r["type"] == "history" for k in r["history"]["item"]}
    gauges = next(r["history"]["item"] for r in records if r["type"] == "history"
                  and "generation/org_coder-1.5b/replica1/served" in r["history"]["item"])
    assert gauges["generation/org_coder-1.5b/replica0/served"] == 5
    assert gauges["generation/org_coder-1.5b/replica1/peak_inflight"] == 2
    assert gauges["generation/org_coder-1.5b/replica1/completion_tokens"] == 40
    assert gauges["generation/org_coder-1.5b/replica1/mean_latency_s"] == pytest.approx(1.0)
    assert gauges["generation/org_coder-1.5b/replica1/truncation_rate"] == 0.5
    assert gauges["generation/org_coder-1.5b/replica1/tokens_per_s"] > 0
    assert "generation/org_coder-1.5b/replica0/completion_tokens" not in gauges  # generated none
    gen = next(r["history"]["item"] for r in records if r["type"] == "history"
               and "generation/org_coder-1.5b/calls" in r["history"]["item"])
    assert gen["generation/org_coder-1.5b/truncation_rate"] == 0.5
    assert gen["generation/org_coder-1.5b/tokens_per_s"] == pytest.approx(40.0)
    for section in SPEC.sections:
        for panel in section.panels:
            assert all(k in keys for k in (*panel.y, X)), (panel, sorted(keys))
            assert not panel.regex or any(re.fullmatch(panel.regex, k) for k in keys), panel
    try:
        import wandb_workspaces  # noqa: F401
    except ImportError:
        return  # saving it needs the package and a W&B server; the spec is what is checked here
    workspace = build("someone", "kbx_ray")
    assert [s.name for s in workspace.sections] == [s.name for s in SPEC.sections]
