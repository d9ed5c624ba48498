"""A sweep that cannot run says so in one line before Ray starts, and a failed start leaves nothing
behind: no results folder, no W&B run."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from kbx_ray.cli import commands as cli
from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.records.sweep_folder import sweep_id

ROOT = Path(__file__).resolve().parents[2]


def sweep(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(ROOT / "scripts/sweep.py"), *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("bad, needle", [
    ("evaluation.torch_compute=fial", "evaluation.torch_compute='fial' is not a choice"),
    ("sink.wandb.mode=onlin", "sink.wandb.mode='onlin' is not a choice"),
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


# Put on PYTHONPATH as sitecustomize.py: vllm cannot be imported (nor found) in that process.
NO_VLLM = """
import sys

class NoVllm:
    def find_spec(self, name, path=None, target=None):
        if name == "vllm" or name.startswith("vllm."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoVllm())
"""


def test_a_vllm_preset_without_vllm_names_the_extra_before_ray(tmp_path: Path):
    import os

    blocker = tmp_path / "no_vllm"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_VLLM)
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    for model in ("qwen2.5-coder-7b", "tiny"):
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, str(ROOT / "scripts/sweep.py"), f"output_dir={out}",
                            "suite.include=[activation/relu]", f"model={model}"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - t0
        assert r.returncode == 2 and took < 10 and r.stdout == "", (took, r.stderr)
        assert r.stderr.strip().splitlines() == [
            f"kbx: error: model {model} runs on vLLM, which is not installed here: pip install "
            "'kbx_ray[vllm]' (or serve the model with `vllm serve` and use model=openai)"]
        assert not out.exists()


def test_a_replica_no_node_can_hold_stops_the_sweep_at_once(tmp_path: Path):
    """A GPU preset on this CPU-only machine (one machine: no autoscaler adds a node): one line,
    before any evaluator starts, instead of "pending until one joins" forever."""
    import torch

    pytest.importorskip("vllm")
    if torch.cuda.is_available():
        pytest.skip("a GPU machine may hold the replica")
    out = tmp_path / "results"
    r, took = sweep(f"output_dir={out}", "suite.include=[activation/relu]",
                    "model=qwen2.5-coder-7b", "sink.wandb.mode=disabled", timeout=300)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("kbx:")]
    assert errors == [r.stderr.strip().splitlines()[-1]] and errors[0].startswith(
        "kbx: error: no node of this Ray cluster can ever hold a vllm replica of "
        "qwen2.5-coder-7b (GPU=1"), r.stderr
    assert "model=openai" in errors[0] and not out.exists()


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
                       "model=openai", "model.options.base_url=http://127.0.0.1:9/v1",
                       "model.options.retries=0", "sink.wandb.mode=offline"])
    sweep_dir = tmp_path / "results" / sweep_id(cfg)
    with caplog.at_level("INFO", logger="kbx_ray.orchestration.engine"), pytest.raises(ConfigError):
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
    sweep inherits SIGINT ignored and blocked, and stops all the same (kbx_ray/cli/process.py
    `interruptible`): it used to run on to exit 0 whenever pytest itself had been started with
    SIGINT ignored (in the background of a non-interactive shell, as CI lanes were)."""
    import os
    import signal

    out = tmp_path / "results"
    args = [f"output_dir={out}", "suite.include=[activation,math]", "sink.wandb.mode=disabled",
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
    runs = json.loads((folder / "run.json").read_text())["runs"]
    assert [(x["state"], x["cells_written"]) for x in runs] == [("interrupted", recorded)]
    r, _ = sweep(*args, "--dry-run")  # the same command: it resumes with exactly those recorded
    assert r.returncode == 0 and f"; {recorded} already recorded, " in r.stdout, r.stdout


def test_the_results_folder_and_sweep_id_end_a_sweep_on_stdout(tmp_path: Path):
    out = tmp_path / "results"
    r, _ = sweep(f"output_dir={out}", "suite.include=[math/exp]", "sink.wandb.mode=disabled",
                 timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (folder,) = out.iterdir()
    assert r.stdout.splitlines() == [f"sweep {folder.name}: 1 of 1 cells recorded (1 by this run)",
                                     f"results: {folder}"]
    assert f"report: python scripts/report.py {folder}" in r.stderr  # W&B off: how to build it
    r = subprocess.run([sys.executable, str(ROOT / "scripts/report.py"), str(folder)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == f"report: {folder / 'report' / 'report.html'}\n", r
    assert (folder / "report" / "report.html").is_file()


def test_closing_a_vllm_backend_whose_replica_is_pending_takes_seconds(local_ray):
    """Ctrl-C, or the exit handler, closes the backend: a replica that was never placed used to
    hold the shutdown call for two minutes."""
    from kbx_ray.llm.vllm_actor import VLLMBackend
    from kbx_ray.llm.vllm_spec import VLLMSpec

    backend = VLLMBackend(VLLMSpec(name="pending", engine={"model": "none"}, gpus_per_replica=1,
                                   max_inflight=4))
    (actor,) = backend.actors
    t0 = time.monotonic()
    backend.close()
    assert time.monotonic() - t0 < 6
    with pytest.raises(ray.exceptions.RayActorError):  # killed, not left pending
        ray.get(actor.ready.remote(), timeout=30)


def test_ray_actor_output_goes_to_the_log_file_not_stdout(local_ray, tmp_path: Path,
                                                          capfd: pytest.CaptureFixture):
    from kbx_ray.orchestration.ray_session import worker_output_to

    @ray.remote(num_cpus=0)
    class Chatty:
        def speak(self, word: str) -> None:
            print(word, flush=True)
            print(f"{word}-err", file=sys.stderr, flush=True)

    actor = Chatty.remote()
    log_file = tmp_path / "ray.log"
    with worker_output_to(log_file):
        ray.get(actor.speak.remote("kbx-chatty-line"))
        deadline = time.monotonic() + 30
        while "kbx-chatty-line-err" not in (log_file.read_text() if log_file.exists() else ""):
            assert time.monotonic() < deadline, "the actor's output never reached the log file"
            time.sleep(0.2)
    text = log_file.read_text()
    assert "kbx-chatty-line\n" in text or "kbx-chatty-line" in text.splitlines()[0]
    out, err = capfd.readouterr()
    assert "kbx-chatty-line" not in out and "kbx-chatty-line" not in err
    ray.kill(actor)


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def test_a_lost_ray_head_ends_the_sweep_in_one_line_and_run_json_says_failed(tmp_path: Path):
    """The GCS of the sweep's own local cluster is killed once a cell is recorded (as `ray stop`
    or a lost head node does): one `kbx:` line on stderr, nothing on stdout, exit 1 well before
    Ray's own 60 s, run.json `failed` with the cells that are in Parquet, Ray's output in the
    sweep folder's ray.log."""
    import os
    import signal

    from kbx_ray.sinks import done_cells

    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts/sweep.py"), f"output_dir={out}",
                             "suite.include=[activation,math]", "sink.wandb.mode=disabled",
                             "engine.flush_every=1", "engine.flush_min_s=0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not list(out.glob("*/evaluations/part-*.parquet")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.3)
        gcs = [k for k in _children(proc.pid) if b"gcs_server" in Path(f"/proc/{k}/cmdline")
               .read_bytes()]
        assert len(gcs) == 1
        t0 = time.monotonic()
        os.kill(gcs[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what Ray left of the session this test started
        except ProcessLookupError:
            pass
    assert proc.returncode == 1 and took < 55 and stdout == "", (took, stderr[-3000:])
    assert "Traceback" not in stderr and "Failed to connect to GCS" not in stderr, stderr[-3000:]
    kbx_lines = [ln for ln in stderr.splitlines() if ln.startswith("kbx:")]
    assert kbx_lines == [stderr.strip().splitlines()[-1]], stderr[-3000:]
    assert kbx_lines[0].startswith("kbx: error: the sweep stopped, the Ray cluster failed "
                                   "(ClusterLost: ") and "re-run the same command" in kbx_lines[0]
    (folder,) = out.iterdir()
    (run,) = json.loads((folder / "run.json").read_text())["runs"]
    in_parquet = len(done_cells(folder))
    assert run["state"] == "failed" and run["cells_written"] == in_parquet >= 1, run
    assert "ClusterLost" in run["error"] and (folder / "ray.log").is_file()
    assert f"{in_parquet} of 46 cells recorded in {folder}" in kbx_lines[0]
