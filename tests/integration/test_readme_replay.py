"""The README's replay example, taken from README.md and run as written on the default sweep's
results; and a replay source that cannot answer a cell stops before Ray starts.

The two sweeps are narrowed to two tasks (`suite.include`, which the sweep id leaves out, so the
folder is the default sweep's) and run without W&B, to keep CI short; the command is otherwise
the README's, word for word, in a fresh folder as a new user would run it."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kbx_ray.sinks import read_table

ROOT = Path(__file__).resolve().parents[2]
NARROW = ["suite.include=[activation/relu,math/exp]", "sink.wandb.mode=disabled"]


def readme_command(needle: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    (line,) = [ln for ln in text.splitlines() if needle in ln and ln.startswith("python ")]
    return shlex.split(line.split("#", 1)[0])


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert argv[:2] == ["python", "scripts/sweep.py"], argv
    env = dict(os.environ, WANDB_MODE="disabled")
    return subprocess.run([sys.executable, str(ROOT / "scripts/sweep.py"), *argv[2:]], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def default_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    cwd = tmp_path_factory.mktemp("user")
    r = run(["python", "scripts/sweep.py", *NARROW], cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    (sweep_dir,) = (cwd / "results").iterdir()
    # the README: "the folder the default sweep printed (`results: ...`)", on stdout
    assert r.stdout.splitlines()[-1] == f"results: results/{sweep_dir.name}", r.stdout
    return cwd, sweep_dir.name


def test_the_readme_replay_example_runs_on_the_default_sweep(default_sweep):
    cwd, sid = default_sweep
    argv = readme_command("model=replay model.options.path=results/<sweep_id>")
    assert "method=repair" in argv and "model=replay" in argv
    argv = [a.replace("<sweep_id>", sid) for a in argv]
    strict = [a for a in argv if a != "model.options.match_method=false"]  # without the option
    r = run(strict + NARROW + ["--dry-run"], cwd)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        f"kbx: error: replay source results/{sid} cannot answer 2 of the 2 cells to run (first: "
        "task activation/relu sample 0 branch 0 (method repair)): the source's rows are of method "
        "one_shot: set model.options.match_method=false"), r.stderr
    r = run(argv + NARROW, cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    (replayed,) = [d for d in (cwd / "results").iterdir() if d.name != sid]
    ev = read_table(replayed, "evaluations")
    gen = read_table(replayed, "generations")
    source = read_table(cwd / "results" / sid, "generations").set_index("task_id")
    assert sorted(ev.task_id) == ["activation/relu", "math/exp"] and (ev.method == "repair").all()
    assert ev.exec_ok.all() and (ev["round"] == 0).all()  # correct at round 0: repair stops
    for row in gen.itertuples():  # the source's completions, not empty stand-ins
        assert row.completion == source.loc[row.task_id, "completion"] and row.completion


def test_a_source_that_cannot_answer_a_cell_stops_before_ray(default_sweep):
    cwd, sid = default_sweep
    argv = [a.replace("<sweep_id>", sid) for a in
            readme_command("model=replay model.options.path=results/<sweep_id>")]
    wider = ["suite.include=[activation/relu,math/exp,reduce/sum]", "sink.wandb.mode=disabled",
             "output_dir=elsewhere"]
    r = run(argv + wider, cwd)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == (f"kbx: error: replay source results/{sid} cannot answer 1 of the 3 cells to "
                    "run (first: task reduce/sum sample 0 branch 0 (method repair)): narrow "
                    "suite.include to the tasks it holds, or add model.options.on_missing=skip to "
                    "run anyway (the unanswered cells are recorded as no_code_block)")
    assert not (cwd / "elsewhere").exists()  # it stopped before a folder (and before Ray)
    skip = run(argv + wider + ["model.options.on_missing=skip", "--dry-run"], cwd)
    assert skip.returncode == 0 and "1 of the 3 cells to run have no completion" in " ".join(
        skip.stderr.split()), skip.stderr
