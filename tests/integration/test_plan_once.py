"""The config is resolved once per command: each method and model preset of the grid is read from
conf/ once, by a dry run and by a real sweep (replay, local Ray, the CPU), through `kbx sweep`."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import ray
from omegaconf import OmegaConf

from kbx_ray.cli import commands as cli
from kbx_ray.config.compose import CONF_DIR
from kbx_ray.sinks import read_table

RELU_REPAIR = Path(__file__).parents[1] / "fixtures" / "replay" / "relu_repair.jsonl"
PRESETS = {"method/one_shot.yaml": 1, "method/repair.yaml": 1, "model/replay.yaml": 1}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """conf/<group>/<name>.yaml -> how many times it was read."""
    counts: Counter = Counter()
    load = OmegaConf.load

    def counted(path, *args, **kwargs):
        where = Path(path).resolve()
        if where.is_relative_to(CONF_DIR) and where.parent.name in ("method", "model"):
            counts[where.relative_to(CONF_DIR).as_posix()] += 1
        return load(path, *args, **kwargs)

    monkeypatch.setattr(OmegaConf, "load", counted)
    return counts


def sweep_args(out: Path) -> list[str]:
    return ["sweep", "-q", f"output_dir={out}", "suite.include=[activation/relu]",
            "sweep.methods=[one_shot,repair]", "sweep.models=[replay]",
            f"model.options.path={RELU_REPAIR}", "evaluation.seeds=1", "sink.wandb.mode=disabled"]


def test_a_dry_run_reads_each_preset_once(reads, tmp_path, capsys):
    assert cli.main(["sweep", "--dry-run", *sweep_args(tmp_path)[1:]]) == 0
    assert "2 cells" in capsys.readouterr().out
    assert dict(reads) == PRESETS


def test_a_sweep_reads_each_preset_once(local_ray, reads, tmp_path, capsys):
    assert cli.main(sweep_args(tmp_path)) == 0
    assert dict(reads) == PRESETS
    folder = Path(capsys.readouterr().out.split("results: ")[1].splitlines()[0])
    ev = read_table(folder, "evaluations")
    assert sorted(ev.method.unique()) == ["one_shot", "repair"]
    assert list(ev[ev.method == "repair"].sort_values("round").error_kind) == [
        "syntax_error", "mismatch", ""]  # the replayed rounds, until the first correct one
