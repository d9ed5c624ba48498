"""kbx_ray.records.ablation on evaluation rows read back from Parquet: the state and metrics after k
rounds."""
from __future__ import annotations

import math

import pytest

from kbx_ray.records.ablation import rounds_curve, rounds_state
from kbx_ray.sinks import read_table
from kbx_ray.sinks.parquet import ParquetSink


def row(cell, rnd, *, branch=0, call=False, ok=False, speedup=None, stage="compile", hw="h100",
        method="repair", cand=None, final=False):
    return {"cell_id": cell, "task_id": "t/a", "category": "Math", "method": method, "model": "m",
            "sample": 0, "round": rnd, "branch": branch, "hardware": hw, "call_ok": call,
            "exec_ok": ok, "speedup": speedup, "stage": "done" if ok else stage, "final": final,
            "candidate_id": cand or f"{cell}-{rnd}-{branch}", "error_kind": "" if ok else "mismatch"}


def roundtrip(tmp_path, rows):
    sink = ParquetSink(tmp_path)
    sink.start(1, {})
    sink.write_evaluations(rows)
    return read_table(tmp_path, "evaluations")  # nullable dtypes, as the report reads them


def test_state_after_k_is_the_best_so_far_and_holds_after_the_stop(tmp_path):
    rows = [row("a", 0, stage="static"), row("a", 1, call=True, stage="correctness"),
            row("a", 2, call=True, ok=True, speedup=1.1), row("a", 3, call=True, ok=True, speedup=1.5),
            row("a", 4, call=True, ok=True, speedup=1.2, final=True),
            # b stopped at round 1 (correct); a slower correct kernel does not replace a faster one
            row("b", 0, call=True, ok=True, speedup=2.0), row("b", 1, call=True, ok=True, speedup=1.0)]
    st = rounds_state(roundtrip(tmp_path, rows))
    a = st[st.cell_id == "a"].sort_values("k")
    assert list(a.candidate_id) == ["a-0-0", "a-1-0", "a-2-0", "a-3-0", "a-3-0"]
    assert list(a.call_ok) == [False, True, True, True, True]
    assert list(a.exec_ok) == [False, False, True, True, True]
    b = st[st.cell_id == "b"].sort_values("k")
    assert list(b.k) == [0, 1, 2, 3, 4] and set(b.candidate_id) == {"b-0-0"}
    assert list(b.rounds_used) == [0, 1, 1, 1, 1]
    assert len(rounds_state(roundtrip(tmp_path / "x", rows), max_rounds=1)) == 2 * 2


def test_a_cell_that_ran_out_of_a_smaller_budget_says_nothing_past_it(tmp_path):
    """A sweep's rounds axis runs budgets 1 and 3 side by side: the R=1 cell that spent its budget
    has no state at k=2..3 (a run with rounds=3 might have fixed it); one that stopped because it
    was correct keeps its answer."""
    rows = [row("r3", 0), row("r3", 1, call=True), row("r3", 2, call=True),
            {**row("r3", 3, call=True, ok=True, speedup=1.2, final=True), "stop_reason": "correct"},
            row("r1", 0), {**row("r1", 1, call=True, final=True), "stop_reason": "max_rounds"},
            {**row("ok", 0, call=True, ok=True, speedup=2.0, final=True), "stop_reason": "correct"}]
    st = rounds_state(roundtrip(tmp_path, rows))
    assert sorted(st[st.cell_id == "r1"].k) == [0, 1]
    assert sorted(st[st.cell_id == "r3"].k) == [0, 1, 2, 3]
    assert sorted(st[st.cell_id == "ok"].k) == [0, 1, 2, 3]
    curve = rounds_curve(roundtrip(tmp_path / "c", rows), by=()).set_index("k")
    assert list(curve.cells) == [3, 3, 2, 2]


def test_ties_go_to_the_earliest_round_and_branch():
    import pandas as pd

    rows = [row("c", 0, branch=1, call=True, ok=True), row("c", 0, branch=0, call=True, ok=True),
            row("c", 1, branch=0, call=True, ok=True)]
    st = rounds_state(pd.DataFrame(rows))
    assert list(st.candidate_id) == ["c-0-0", "c-0-0"]


def test_only_the_primary_pool_judges_rounds(tmp_path):
    rows = [row("d", 0, call=True), row("d", 1, call=True, ok=True, speedup=1.3, final=True),
            # the final answer re-evaluated on a second pool: one row, not a round history
            row("d", 1, call=True, ok=True, speedup=0.7, hw="a100", final=True, cand="d-1-0")]
    st = rounds_state(roundtrip(tmp_path, rows))
    assert set(st.hardware) == {"h100"} and list(st.exec_ok) == [False, True]


def test_curve_rates_per_method_and_k(tmp_path):
    rows = [row("a", 0), row("a", 1, call=True), row("a", 2, call=True, ok=True, speedup=2.0),
            row("b", 0, call=True, ok=True, speedup=0.5)]
    curve = rounds_curve(roundtrip(tmp_path, rows)).set_index("k")
    assert list(curve.cells) == [2, 2, 2]
    assert list(curve.call_rate) == [0.5, 1.0, 1.0] and list(curve.exec_rate) == [0.5, 0.5, 1.0]
    assert curve.loc[2, "geomean_speedup"] == pytest.approx(1.0)
    assert curve.loc[0, "fast_1"] == 0.0 and curve.loc[2, "fast_1"] == 0.5
    assert math.isclose(curve.loc[0, "geomean_speedup"], 0.5)
    assert rounds_curve(roundtrip(tmp_path / "e", [])).empty


def test_the_wandb_curve_draws_one_line_per_model_where_there_are_several(tmp_path):
    from kbx_ray.sinks.wandb_plots import compact, curve_lines

    rows = [row("a", 0, call=True, ok=True, speedup=1.0, final=True),
            {**row("b", 0, final=True), "model": "other"}]
    lines = curve_lines(rounds_curve(roundtrip(tmp_path, rows)))
    assert sorted(lines) == [(0, 0.0, "repair / other"), (0, 1.0, "repair / m")]
    one = curve_lines(rounds_curve(roundtrip(tmp_path / "one", rows[:1])))
    assert one == [(0, 1.0, "repair")]
    assert compact({**rows[0], "stop_reason": "max_rounds"})["stop_reason"] == "max_rounds"
