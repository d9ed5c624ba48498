"""A sweep replaying another harness's kernels covers the tasks and samples they hold, not the
whole suite: engine.plan on the repo's own suite with a KernelBench-X-shaped JSONL and a folder of
.py files, an explicit suite.include intersected with them, and a sweep's generations untouched."""
from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import build_axes, narrow_to_sources
from kbx_ray.config.plan import Sweep
from kbx_ray.suites.builtin import DEFAULT_ROOT

SUITE_SIZE = len(list(DEFAULT_ROOT.glob("*/*/task.py")))


def kernel(task_id: str) -> str:
    return (DEFAULT_ROOT / task_id / "solution.py").read_text()


@pytest.fixture
def preds(tmp_path: Path) -> Path:
    """Two kernels for activation/relu, one for math/exp, in KernelBench-X's JSONL shape."""
    rows = [{"predict": f"```python\n{kernel(t)}```", "file": f"{t}.py", "ok": ok}
            for t, ok in (("activation/relu", True), ("math/exp", False),
                          ("activation/relu", True))]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def plan(tmp_path: Path, source: Path, *extra: str) -> Sweep:
    return engine.plan(load_config([f"output_dir={tmp_path / 'out'}", "model=replay",
                                    f"model.options.path={source}", "sink.wandb.mode=disabled",
                                    *extra]))


def samples(p: Sweep) -> dict[str, int]:
    return dict(Counter(c.task_id for c in p.cells()))


def test_the_plan_covers_the_tasks_and_samples_the_source_holds(tmp_path, preds, caplog):
    with caplog.at_level(logging.INFO, logger="kbx_ray.orchestration.grid"):
        p = plan(tmp_path, preds)
    assert samples(p) == {"activation/relu": 2, "math/exp": 1} and p.n_cells == p.n_todo == 3
    assert sorted(c.sample for c in p.cells() if c.task_id == "activation/relu") == [0, 1]
    assert list(p.tasks) == ["activation/relu", "math/exp"]
    assert [r.getMessage() for r in caplog.records if r.name == "kbx_ray.orchestration.grid"] == [
        f"replay: 2 of {SUITE_SIZE} tasks have kernels in {preds}; the sweep covers those"]
    # sweep.samples, where a config sets it, caps the samples per task
    assert samples(plan(tmp_path, preds, "sweep.samples=1")) == {"activation/relu": 1,
                                                                   "math/exp": 1}


def test_a_folder_of_kernels_narrows_the_same_way(tmp_path):
    folder = tmp_path / "kernels"
    for name, task in (("relu.py", "activation/relu"), ("relu__v2.py", "activation/relu"),
                       ("sum.py", "reduce/sum")):
        (folder / task.split("/")[0]).mkdir(parents=True, exist_ok=True)
        (folder / task.split("/")[0] / name).write_text(kernel(task))
    assert samples(plan(tmp_path, folder)) == {"activation/relu": 2, "reduce/sum": 1}


def test_an_explicit_include_is_intersected_and_names_what_the_source_lacks(tmp_path, preds):
    # a category: intersected with the source's tasks
    assert samples(plan(tmp_path, preds, "suite.include=[activation]")) == {"activation/relu": 2}
    # an id the source holds no kernel for: one line naming it
    with pytest.raises(ConfigError) as e:
        plan(tmp_path, preds, "suite.include=[activation/relu,reduce/sum,math/exp]")
    assert str(e.value) == (f"suite.include names 1 task(s) that {preds} holds no kernel for: "
                            "reduce/sum: drop them from suite.include, or set "
                            "model.options.on_missing=skip to record them as no_code_block")
    # ... unless asked to record it as empty
    skip = plan(tmp_path, preds, "suite.include=[activation/relu,reduce/sum]",
                "model.options.on_missing=skip")
    assert samples(skip) == {"activation/relu": 2, "reduce/sum": 1}
    with pytest.raises(ConfigError, match="suite.include and .* share no task"):
        plan(tmp_path, preds, "suite.include=[reduce]")


def test_a_task_the_suite_lacks_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"predict": "x = 1", "file": "activation/nope.py"}) + "\n")
    with pytest.raises(ConfigError, match=r"holds kernels for 1 task\(s\) that suite=kbx lacks "
                                          r"\(activation/nope\): fix their \"file\" fields"):
        plan(tmp_path, bad)


def test_a_sweeps_generations_are_not_narrowed(tmp_path):
    gens = tmp_path / "gens.jsonl"
    gens.write_text(json.dumps({"task_id": "math/exp", "sample": 0, "round": 0,
                                "completion": "x"}) + "\n")
    cfg = load_config(["model=replay", f"model.options.path={gens}",
                       "suite.include=[math/exp,activation/relu]"])
    assert narrow_to_sources(cfg.suite, build_axes(cfg).models, None) == (
        ["math/exp", "activation/relu"], None)
    with pytest.raises(ConfigError, match="cannot answer 1 of the 2 cells"):
        plan(tmp_path, gens, "suite.include=[math/exp,activation/relu]")
