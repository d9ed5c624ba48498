"""scripts/bench/mutation_score.py: the figures it writes, the reviewed equivalent mutants and --merge."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ms():
    spec = importlib.util.spec_from_file_location("mutation_score", ROOT / "scripts/bench/mutation_score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# task, category, operator, line, covered, killed_by (None: survived), description
RECORDS = [
    ["a/x", "Math", "mask_removed", 3, True, "mismatch", "m"],
    ["a/x", "Math", "dropped_contiguous", 9, True, None, "x.contiguous() -> x"],
    ["a/x", "Math", "other_changed", 5, True, None, "other=0.0 -> other=1.0"],
    ["b/y", "Reduce", "off_by_one", 4, True, "runtime_error", "o"],
    ["b/y", "Reduce", "lowered_dtype", 7, False, None, "l"],
]


def test_equivalent_mutants_leave_the_denominator_and_a_killed_one_is_reported(ms, tmp_path, monkeypatch):
    equivalent = [{"task_id": "a/x", "operator": "dropped_contiguous", "line": 9,
                   "description": "x.contiguous() -> x", "reason": "x is contiguous by contract"},
                  {"task_id": "b/y", "operator": "off_by_one", "line": 4, "description": "o", "reason": "wrong"}]
    (tmp_path / "eq.json").write_text(json.dumps(equivalent))
    monkeypatch.setattr(ms, "EQUIVALENT", tmp_path / "eq.json")
    r = ms.summarize(RECORDS, {}, ["a/x", "b/y"], 1, 1.0)
    assert [e["operator"] for e in r["equivalent"]] == ["dropped_contiguous"]
    assert r["equivalent"][0]["reason"] == "x is contiguous by contract"
    assert [e["task_id"] for e in r["equivalent_killed"]] == ["b/y"]  # killed, so not equivalent after all
    assert (r["covered"], r["killed"]) == (4, 2)
    assert r["kill_rate"] == round(2 / 3, 4) and r["kill_rate_counting_equivalent"] == 0.5
    assert [s["operator"] for s in r["survivors"]] == ["other_changed"]
    assert r["not_covered"] == {"lowered_dtype": 1} and r["false_positives"] == 0


def test_merge_replaces_only_the_rescored_tasks_and_the_json_round_trips(ms, tmp_path):
    out = tmp_path / "score.json"
    out.write_text(ms.dump(ms.summarize([list(r) for r in RECORDS], {}, ["a/x", "b/y"], 1, 10.0)))
    fresh = [["b/y", "Reduce", "off_by_one", 4, True, "mismatch", "o"],
             ["b/y", "Reduce", "lowered_dtype", 7, True, "mismatch", "l"]]
    records, rejected, ids, wall = ms.merged(out, fresh, {}, ["b/y"], 2.0)
    assert sorted(r[0] for r in records) == ["a/x"] * 3 + ["b/y"] * 2 and ids == ["a/x", "b/y"]
    assert wall == 12.0 and rejected == {}
    r = ms.summarize(records, rejected, ids, 1, wall)
    assert (r["covered"], r["killed"], r["not_covered"]) == (5, 3, {})
