"""The replay backend: sources (JSONL, Parquet parts of a real sweep), keys, filters, ambiguity."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kbx_ray.config.structured import ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.replay import ReplayError
from kbx_ray.sinks.parquet import ParquetSink

FIXTURE = Path(__file__).parents[1] / "fixtures" / "replay" / "relu_repair.jsonl"


def backend(path: Path | str, **opts):
    return build_backend(ModelConfig(name="replayed", backend="replay",
                                     options={"path": str(path), **opts}))


def ask(b, task_id="activation/relu", sample=0, rnd=0, branch=0, method="repair"):
    meta = {"task_id": task_id, "sample": sample, "round": rnd, "branch": branch, "method": method}
    return asyncio.run(b.generate([], GenParams(meta=meta)))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_fixture_matches_its_kernels():
    import runpy

    make = runpy.run_path(str(FIXTURE.parent / "make_relu_repair.py"))
    assert [json.loads(ln) for ln in FIXTURE.read_text().splitlines()] == make["rows"]()


def test_jsonl_is_served_by_round_and_branch(tmp_path):
    b = backend(FIXTURE)
    texts = [ask(b, rnd=r).text for r in range(4)]
    assert len(set(texts)) == 4 and "def relu(x: torch.Tensor) -> torch.Tensor\n" in texts[0]
    rows = [{"task_id": "t/a", "sample": 0, "round": 0, "branch": i, "completion": f"c{i}",
             "finish_reason": "length", "completion_tokens": 7} for i in range(3)]
    b = backend(write_jsonl(tmp_path / "g.jsonl", rows))
    g = ask(b, "t/a", branch=2)
    assert (g.text, g.finish_reason, g.completion_tokens, g.model) == ("c2", "length", 7, "replayed")


def test_a_sweep_folder_replays_its_parquet_parts(tmp_path):
    sink = ParquetSink(tmp_path / "sweep")
    sink.start(1, {})
    base = {"cell_id": "x", "task_id": "t/a", "sample": 1, "model": "m1", "method": "repair"}
    sink.write_generations([{**base, "round": 0, "completion": "r0"}])
    sink.write_generations([{**base, "round": 1, "branch": 1, "completion": "r1b1"},
                            {**base, "model": "m2", "round": 0, "completion": "other model"}])
    with pytest.raises(ReplayError, match="1 keys have different completions") as e:
        backend(tmp_path / "sweep")
    assert "\n" not in str(e.value)
    for path in (tmp_path / "sweep", tmp_path / "sweep" / "generations"):
        b = backend(path, where={"model": "m1"})
        assert ask(b, "t/a", sample=1).text == "r0"
        assert ask(b, "t/a", sample=1, rnd=1, branch=1).text == "r1b1"
    assert ask(backend(tmp_path / "sweep", duplicates="last"), "t/a", sample=1).text == "other model"
    # Rows that name a method answer only that method, unless match_method is off.
    with pytest.raises(ReplayError, match="method one_shot"):
        ask(backend(tmp_path / "sweep", where={"model": "m1"}), "t/a", sample=1, method="one_shot")
    b = backend(tmp_path / "sweep", where={"model": "m1"}, match_method=False)
    assert ask(b, "t/a", sample=1, method="one_shot").text == "r0"


def test_missing_keys_error_or_skip(tmp_path):
    with pytest.raises(ReplayError, match="round 4 branch 0") as e:
        ask(backend(FIXTURE), rnd=4)
    assert "on_missing=skip" in str(e.value)
    b = backend(FIXTURE, on_missing="skip")
    g = ask(b, rnd=4)
    assert g.text == "" and b.skipped == 1


@pytest.mark.parametrize("opts, needle", [
    ({"path": ""}, "needs model.options.path"),
    ({"path": "/nonexistent/gen.jsonl"}, "does not exist"),
    ({"path": str(FIXTURE), "on_missing": "ignore"}, "model.options.on_missing='ignore' is not a "
     "choice: choose one of error, skip"),
    ({"path": str(FIXTURE), "colour": "red"}, "unknown key model.options.colour in model replay: "
     "model.options takes path, on_missing, match_method, where, duplicates"),
])
def test_bad_options_are_one_clear_line(opts, needle):
    with pytest.raises(ConfigError) as e:
        build_backend(ModelConfig(name="replay", backend="replay", options=opts))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_rows_without_required_columns_are_refused(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"task_id": "t/a", "round": 0, "text": "x"}])
    with pytest.raises(ReplayError, match=r"lacks columns \['sample', 'completion'\]"):
        backend(path)
    (tmp_path / "bad.jsonl").write_text('{"task_id": 1}\nnot json\n')
    with pytest.raises(ReplayError, match="line 2: not JSON"):
        backend(tmp_path / "bad.jsonl")


def test_a_budget_of_a_rounds_axis_takes_its_base_methods_rows(tmp_path):
    """`sweep.rounds=[0,1,2]` labels each budget `repair@R<k>`; replaying one `repair` run into
    them serves its rows, while a budget's own rows win and another method's never answer."""
    rows = [{"task_id": "t/a", "sample": 0, "round": 1, "method": "repair", "completion": "base"},
            {"task_id": "t/a", "sample": 0, "round": 2, "method": "repair@R2", "completion": "own"},
            {"task_id": "t/a", "sample": 0, "round": 2, "method": "repair", "completion": "base2"}]
    b = backend(write_jsonl(tmp_path / "g.jsonl", rows))
    assert ask(b, "t/a", rnd=1, method="repair@R1").text == "base"
    assert ask(b, "t/a", rnd=2, method="repair@R2").text == "own"
    with pytest.raises(ReplayError, match="method geak@R1"):
        ask(b, "t/a", rnd=1, method="geak@R1")
