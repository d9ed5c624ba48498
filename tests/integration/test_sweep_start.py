"""A sweep that cannot run says so in one line before Ray starts, and a failed start leaves nothing
behind: no results folder, no W&B run."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from kbx_ray import cli, engine
from kbx_ray.config import ConfigError, load_config
from kbx_ray.sweep_folder import sweep_id

ROOT = Path(__file__).resolve().parents[2]


def sweep(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(ROOT / "scripts/sweep.py"), *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("bad, needle", [
    ("evaluation.torch_compute=fial", "evaluation.torch_compute='fial' is not a choice"),
    ("wandb.mode=onlin", "wandb.mode='onlin' is not a choice"),
])
def test_a_bad_choice_exits_2_in_one_line_before_ray(tmp_path: Path, bad: str, needle: str):
    out = tmp_path / "results"
    r, took = sweep(f"output_dir={out}", "suite.include=[math/exp]", bad)  # a real run, not dry
    assert r.returncode == 2 and took < 5, (took, r.stderr)
    assert r.stderr.strip() == f"kbx: error: {r.stderr.strip().split('kbx: error: ', 1)[1]}"
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert not out.exists()
    # in this process: the same path through the CLI, and Ray was never started
    assert not ray.is_initialized()
    assert cli.main(["sweep", f"output_dir={out}", "suite.include=[math/exp]", bad]) == 2
    assert not ray.is_initialized() and not out.exists()


def test_a_missing_tiny_model_is_one_line_with_its_build_command(tmp_path: Path):
    out, missing = tmp_path / "results", tmp_path / "tiny"
    r, took = sweep(f"output_dir={out}", "suite.include=[math/exp]", "model=tiny",
                    f"model.path={missing}")
    assert r.returncode == 2 and took < 5 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"kbx: error: model tiny: weights folder {missing} does not exist: build it with "
        f"`python tests/fixtures/tiny_model.py {missing}`"]
    assert not out.exists()


def test_version_and_logs_on_stderr(tmp_path: Path):
    from kbx_ray import __version__

    r = subprocess.run([sys.executable, "-m", "kbx_ray.cli", "--version"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(f"kbx_ray {__version__}")
    source = ROOT / "tests/fixtures/replay/relu_repair.jsonl"
    r = subprocess.run([sys.executable, "-m", "kbx_ray.cli", "-v", "sweep", "--dry-run",
                        f"output_dir={tmp_path}", "suite.include=[activation/relu]",
                        "method=repair", "model=replay", f"model.options.path={source}"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sweep repair-replay-kbx-")  # the answer, and only it
    assert "replay: 4 completions" in r.stderr and "replay:" not in r.stdout  # the logs


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def test_a_failed_start_leaves_no_folder_and_no_wandb_run(local_ray, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture):
    """Ray is up and the evaluators start, but the model server is down: nothing was recorded, so
    the results folder goes again and W&B (started by the first rows) never made a run."""
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = load_config([f"output_dir={tmp_path / 'results'}", "suite.include=[math/exp]",
                       "model=openai", "model.base_url=http://127.0.0.1:9/v1",
                       "model.options.retries=0", "wandb.mode=offline"])
    sweep_dir = tmp_path / "results" / sweep_id(cfg)
    with caplog.at_level("INFO", logger="kbx_ray.engine"), pytest.raises(ConfigError):
        engine.run_sweep(cfg)
    assert f"nothing was recorded; removed {sweep_dir}" in caplog.text  # it was made, then gone
    assert not sweep_dir.exists() and not list(tmp_path.rglob("offline-run-*"))


# Starts the command in argv[1:] with SIGINT ignored and blocked, as a background job of a shell
# without job control (a script, a CI runner) and a process started by Ray inherit it.
IGNORING_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}); "
                   "os.execv(sys.argv[1], sys.argv[1:])")


def test_ctrl_c_prints_one_line_and_the_same_command_resumes(tmp_path: Path):
    """SIGINT to the sweep's process group, as a terminal's Ctrl-C sends it, once a cell is
    recorded: no traceback, one line naming how many cells are recorded; a re-run resumes. The
    sweep inherits SIGINT ignored and blocked, and stops all the same (kbx_ray/cli.py
    `interruptible`): it used to run on to exit 0 whenever pytest itself had been started with
    SIGINT ignored (in the background of a non-interactive shell, as CI lanes were)."""
    import os
    import signal

    out = tmp_path / "results"
    args = [f"output_dir={out}", "suite.include=[activation,math]", "wandb.mode=disabled",
            "engine.flush_every=1", "engine.flush_min_s=0"]
    proc = subprocess.Popen([sys.executable, "-c", IGNORING_SIGINT, sys.executable,
                             str(ROOT / "scripts/sweep.py"), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(out.glob("*/evaluations/part-*.parquet")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"kbx: interrupted: (\d+) of (\d+) cells recorded in \S+ \(\d+ by this "
                        r"run\); re-run the same command to resume", last), last
    recorded = int(re.search(r"interrupted: (\d+)", last).group(1))
    (folder,) = out.iterdir()
    assert (folder / "generations.wal.jsonl").is_file()  # the cells in flight, for the resume
    assert recorded >= 1 and sum("interrupted" in ln for ln in stderr.splitlines()) == 1
    r, _ = sweep(*args, "--dry-run")  # the same command: it resumes with exactly those recorded
    assert r.returncode == 0 and f"; {recorded} already recorded, " in r.stdout, r.stdout


def test_the_results_folder_and_sweep_id_end_a_sweep_on_stdout(tmp_path: Path):
    out = tmp_path / "results"
    r, _ = sweep(f"output_dir={out}", "suite.include=[math/exp]", "wandb.mode=disabled",
                 timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (folder,) = out.iterdir()
    assert r.stdout.splitlines() == [f"sweep {folder.name}: 1 of 1 cells recorded (1 by this run)",
                                     f"results: {folder}"]
