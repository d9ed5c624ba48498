"""scripts/bench/compare_runs.py: two suite runs' verdicts compared task by task, a platform
failure of the base that now passes told apart from a verdict that changed."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "compare_runs.py"


def _load():
    spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(tid, ok, kind="", msg="", speedup=None, corr=1.0):
    return {"task_id": tid, "exec_ok": ok, "error_kind": kind, "error_msg": msg,
            "speedup": speedup, "eval_wall_s": 10.0, "stage_s": {"correctness": corr}}


def test_verdicts_stages_and_mended_failures(tmp_path):
    base = {"wall_s": 100, "n_oom_shared_gpu": 2, "tasks": [_row("a", True, speedup=2.0, corr=4.0),
                                     _row("b", False, "runtime_error", "the replay ... CUDA out of "
                                          "memory"), _row("c", True, speedup=1.0),
                                     _row("only_base", True)]}
    new = {"wall_s": 50, "n_oom_shared_gpu": 0, "gpu_mem_full_share": 0.1, "tasks": [_row("a", True, speedup=2.2, corr=1.0), _row("b", True),
                                   _row("c", False, "mismatch"), _row("only_new", True)]}
    c = _load().compare(base, new)
    assert c["tasks"] == 3
    assert c["differ"] == [("c", "pass", "mismatch")]
    assert c["mended"] == [("b", "runtime_error", "pass")]
    assert c["stages"]["correctness"] == (6.0, 3.0)
    assert abs(c["speedup_ratio_geomean"] - 1.1) < 1e-9
    # each run's own figures, as recorded (an older file lacks the newer ones)
    assert c["run"] == {"n_oom_shared_gpu": (2, 0), "gpu_mem_full_share": (None, 0.1)}
    assert "| n_oom_shared_gpu (whole run) | 2 | 0 |" in _load().table(c, "b", "n")
    (tmp_path / "b.json").write_text(json.dumps(base))
    (tmp_path / "n.json").write_text(json.dumps(new))
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "b.json"),
                          str(tmp_path / "n.json")], capture_output=True, text=True)
    assert run.returncode == 1 and "- c: pass -> mismatch" in run.stdout
    same = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "b.json"),
                           str(tmp_path / "b.json")], capture_output=True, text=True)
    assert same.returncode == 0 and "Verdicts that differ: 0" in same.stdout


def test_steps_that_held_a_timing_up_are_tabulated_when_either_run_has_them():
    """`hu_*` (GpuLock.held_up) are rows for whichever labels either run recorded; a run without
    a label counts 0 for it."""
    base = {"tasks": [_row("a", True), _row("b", True)]}
    new = {"tasks": [_row("a", True), _row("b", True)]}
    new["tasks"][0]["stage_s"]["hu_c_seed"] = 1.5
    new["tasks"][1]["stage_s"]["hu_c_seed"] = 0.5
    base["tasks"][1]["stage_s"]["hu_t_recheck"] = 2.0
    c = _load().compare(base, new)
    assert c["stages"]["hu_c_seed"] == (0.0, 2.0) and c["stages"]["hu_t_recheck"] == (2.0, 0.0)
    assert not any(k.startswith("hu_") for k in _load().compare(base, base)["stages"]
                   if k != "hu_t_recheck")
