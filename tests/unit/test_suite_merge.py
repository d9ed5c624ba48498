"""Merging a partial GPU suite run into the record: rows replaced by task, totals recomputed."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("suite_merge", ROOT / "scripts/bench/suite_merge.py")
suite_merge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_merge)

IDS = {"a/x": "A", "a/y": "A", "b/z": "B"}


def row(tid: str, ok: bool, speedup: float | None, run: str = "0") -> dict:
    return {"task_id": tid, "exec_ok": ok, "speedup": speedup, "run": run}


def test_rows_replaced_and_totals_recomputed():
    base = {"gpu": "NVIDIA H200", "runs": {"0": {"commit": "old"}},
            "tasks": [row("a/x", False, None), row("a/y", True, 0.5), row("gone/t", True, 2.0)]}
    run = {"gpu": "NVIDIA H200", "jobs": 4, "wall_s": 10.0,
           "tasks": [row("a/x", True, 1.5), row("b/z", True, 3.0)]}
    doc = suite_merge.merge(base, run, "C", "abc123", "re-run", IDS)
    by_id = {r["task_id"]: r for r in doc["tasks"]}
    assert set(by_id) == {"a/x", "a/y", "b/z"}  # a task no longer in the suite is dropped
    assert by_id["a/x"]["exec_ok"] and by_id["a/x"]["run"] == "C" and by_id["a/y"]["run"] == "0"
    assert (doc["n_tasks"], doc["n_exec_ok"], doc["n_faster_than_eager"]) == (3, 3, 2)
    assert doc["by_category"] == {"A": {"run": 2, "exec_ok": 2, "faster_than_eager": 1},
                                  "B": {"run": 1, "exec_ok": 1, "faster_than_eager": 1}}
    assert doc["not_run"] == [] and doc["runs"]["C"]["commit"] == "abc123"
    assert "| A | 2 | 2 | 1 |" in suite_merge.table(doc)


def test_a_run_on_another_gpu_is_refused():
    with pytest.raises(SystemExit, match="A100"):
        suite_merge.merge({"gpu": "NVIDIA H200", "tasks": []}, {"gpu": "NVIDIA A100", "tasks": []},
                          "C", "x", "", IDS)


@pytest.mark.slow  # starts the script in a child process
def test_cli_writes_the_record(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"gpu": "NVIDIA H200", "tasks": [
        row("activation/relu", True, 1.2)]}))
    into = tmp_path / "suite.json"
    p = subprocess.run([sys.executable, str(ROOT / "scripts/bench/suite_merge.py"), str(run),
                        "--tag", "C", "--commit", "abc", "--into", str(into)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(into.read_text())
    assert doc["n_tasks"] == 1 and doc["n_tasks_suite"] == 176 and len(doc["not_run"]) == 175
    assert "| Activation | 1 | 1 | 1 |" in p.stdout
