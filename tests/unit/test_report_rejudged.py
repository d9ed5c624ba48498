"""The report's "The study re-judged" section on a synthetic GPU sweep of a study's corpus, with
hand-computed numbers: two tasks over rounds 0..2, our verdicts and timings beside the study's
(`peer_*`), one round the corpus lacks and one kernel whose text could not be read."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from kbx_ray.report import build_report
from kbx_ray.report import rejudged
from kbx_ray.sinks import ParquetSink


def row(task: str, rnd: int, ours: tuple[bool, bool, float | None],
        theirs: tuple[bool, bool, float | None] | None, skip: str | None = None,
        msg: str = "", kind: str | None = None) -> dict:
    call, ok, speedup = ours
    peer = dict(peer_round=rnd, peer_call_ok=theirs[0], peer_exec_ok=theirs[1],
                peer_speedup=theirs[2], peer_perf_ok=theirs[1], peer_skip=skip,
                peer_source=f"all_records.jsonl:{rnd + 1} after_code",
                peer_error=None if theirs[0] else "IndexError: tuple index out of range") \
        if theirs else {}
    return dict(schema_version=1, sweep_id="sw", cell_id=f"cell|{task}", task_id=task,
                candidate_id=f"{task}|{rnd}", task_hash="h", category=task.split("/")[0], level=1,
                method="geak_rounds", model="kbx-corpus", sample=0, round=rnd, hardware="h100",
                stage="done" if ok else "call", call_ok=call, exec_ok=ok, speedup=speedup,
                error_kind=kind or ("" if ok else ("mismatch" if call else "runtime_error")),
                error_msg=msg, final=rnd == 2, stop_reason="max_rounds" if rnd == 2 else None,
                finished_at=100.0 + rnd, **peer)


ROWS = [
    # Math/a: the study says fails, correct 2.0x, correct 4.0x; we say fails, wrong, correct 1.0x
    row("Math/a", 0, (False, False, None), (False, False, None),
        msg="Traceback (most recent call last):\nValueError: bad grid"),
    row("Math/a", 1, (True, False, None), (True, True, 2.0),
        msg="case big: output 0: 3 of 64 elements differ"),
    row("Math/a", 2, (True, True, 1.0), (True, True, 4.0)),
    # Math/b: no round 0 in the corpus; round 1's text unreadable; round 2 correct on both sides
    row("Math/b", 0, (False, False, None), None),
    row("Math/b", 1, (False, False, None), (True, True, 3.0), skip="newlines collapsed as published"),
    row("Math/b", 2, (True, True, 2.25), (True, True, 1.0)),
    # Math/c: torch computes its answer: disqualified by us every round; the study fails round 0
    *[row("Math/c", r, (False, False, None), (r > 0, r > 0, 1.5 if r else None),
          kind="disqualified", msg="computes with torch ops ['sum.default']") for r in (0, 1, 2)],
]


@pytest.fixture()
def df() -> pd.DataFrame:
    from kbx_ray.report.load import normalise
    from kbx_ray.sinks import EVALUATION_SCHEMA

    return normalise(pd.DataFrame(ROWS).reindex(columns=EVALUATION_SCHEMA.names))


def test_per_round_rates_and_speedups_over_kernels_judged_on_both_sides(df):
    t = rejudged.per_round(df).set_index("round")
    assert t["kernels"].tolist() == [2, 2, 3]  # b's round 0 is not the study's; b's round 1 skipped
    assert t.loc[1, ["call_ours", "call_theirs", "exec_ours", "exec_theirs"]].tolist() == \
        [0.5, 1.0, 0.0, 1.0]
    assert t.loc[2, "speedup_ours"] == pytest.approx(math.sqrt(1.0 * 2.25))
    assert t.loc[2, "speedup_theirs"] == pytest.approx((4.0 * 1.0 * 1.5) ** (1 / 3))
    assert math.isnan(t.loc[1, "speedup_ours"]) and t.loc[1, "agree"] == 0.0
    assert t.loc[0, "agree"] == 1.0  # c's disqualification agrees with the study's failure


def test_agreement_and_every_disagreement_with_both_reasons(df):
    m = rejudged.agreement(df).set_index("ours \\ theirs")
    assert m.loc["disqualified", ["fails to run", "runs, wrong", "correct"]].tolist() == [1, 0, 2]
    assert m.loc["fails to run", ["fails to run", "runs, wrong", "correct"]].tolist() == [1, 0, 0]
    assert m.loc["runs, wrong", "correct"] == 1 and m.loc["correct", "correct"] == 2
    d = rejudged.disagreements(df).to_dict("records")
    assert [(x["task_id"], x["round"], x["ours"], x["theirs"]) for x in d] == [
        ("Math/a", 1, "runs, wrong", "correct"), ("Math/c", 1, "disqualified", "correct"),
        ("Math/c", 2, "disqualified", "correct")]
    assert d[0]["our_reason"] == "mismatch: case big: output 0: 3 of 64 elements differ"
    assert d[0]["their_verdict"] == "call_ok=True, exe_ok=True, perf_ok=True, speedup=2.00"
    assert d[1]["our_reason"] == "disqualified: computes with torch ops ['sum.default']"


def test_curve_by_the_ablation_rule_on_both_sides(df):
    c = rejudged.curve(df).set_index("k")
    assert c["cells"].tolist() == [3, 3, 3]
    # ours: only a and b become correct, at round 2
    assert c["exec_ours"].tolist() == pytest.approx([0.0, 0.0, 2 / 3])
    # theirs: a and c correct from round 1; b's round 1 was skipped and counts on neither side
    assert c["exec_theirs"].tolist() == pytest.approx([0.0, 2 / 3, 1.0])
    assert c.loc[1, "speedup_theirs"] == pytest.approx(math.sqrt(2.0 * 1.5))
    assert c.loc[2, "speedup_theirs"] == pytest.approx((4.0 * 1.0 * 1.5) ** (1 / 3))


def test_a_timed_sweep_draws_the_speedup_figure(df, tmp_path: Path):
    sink = ParquetSink(tmp_path / "sw")
    sink.start(2, {})
    sink.write_evaluations(ROWS)
    paths = build_report([tmp_path / "sw"], tmp_path / "report")
    md = paths.markdown.read_text()
    assert "![Speedup per round, ours beside the study's](figures/study_speedup.png)" in md
    assert "Left out" not in md.split("## Speedup per round")[1]
    assert "This run was on the CPU" not in md  # an h100 run
    assert "| Math/b | 1 | all_records.jsonl:2 after_code | newlines collapsed as published |" in md
    assert "no readable config.yaml" in md  # a folder without its config says why nothing more
