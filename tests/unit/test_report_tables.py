"""Report tables on a synthetic Parquet sweep with hand-computed numbers.

The sweep, shaped like the engine's: 2 methods (one_shot, repair with rounds 0..2) x 3 categories
= 6 cells, each judged on its primary pool (h100) and its final kernel re-evaluated on a second
pool (a100): 12 final rows, one per cell x pool.
Every expected value below is worked out by hand in the comment beside it, so a change in a
definition (final rows, fast_p's strict '>', Σref/Σgen vs mean of ratios, the ablation rule)
fails here.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from kbx_ray.report import (
    ReportError, ablation_table, case_sums, compute_tables, find_sweep_dirs, gpu_spread_table,
    load_evaluations, rate_table, speedup_table, state_after_k,
)
from kbx_ray.report.load import normalise
from kbx_ray.report.tables import BY_CATEGORY, BY_HARDWARE, BY_METHOD
from kbx_ray.sinks import EVALUATION_SCHEMA, ParquetSink

TASKS = {"Activation": "activation/relu", "Reduce": "reduce/sum", "Fusion": "fusion/add_gelu"}


def row(method: str, category: str, hw: str, rnd: int, *, call: bool, ok: bool = False,
        speedup: float | None = None, cases: list[tuple[float, float]] = (), final: bool = True,
        cand: str | None = None, sol: float | None = None, sweep: str = "sw") -> dict:
    task = TASKS[category]
    return dict(
        schema_version=1, sweep_id=sweep, cell_id=f"{method}|{task}",
        candidate_id=cand or f"{method}|{task}|r{rnd}", task_id=task, task_hash="h",
        category=category, level=1, method=method, model="org/coder", sample=0, round=rnd,
        hardware=hw, stage="done" if ok else "correctness", call_ok=call, exec_ok=ok,
        error_kind="" if ok else "mismatch", flags=[],
        cases=[{"case": f"c{i}", "ok": ok, "ref_ms": r, "cand_ms": c, "speedup": r / c}
               for i, (r, c) in enumerate(cases)],
        speedup=speedup, sol_fraction=sol, finished_at=1000.0 + rnd, final=final)


ONE_SHOT = [  # one row per cell, final
    row("one_shot", "Activation", "h100", 0, call=True, ok=True, speedup=2.0,
        cases=[(2, 1), (4, 2)], cand="relu-os", sol=0.5),
    row("one_shot", "Activation", "a100", 0, call=True, ok=True, speedup=0.5,
        cases=[(1, 2), (2, 4)], cand="relu-os", sol=0.25),
    row("one_shot", "Reduce", "h100", 0, call=True),
    row("one_shot", "Reduce", "a100", 0, call=True),
    row("one_shot", "Fusion", "h100", 0, call=False),
    row("one_shot", "Fusion", "a100", 0, call=False),
]
REPAIR = [  # rounds judged on h100 until correct; methods mark their best attempt final
    row("repair", "Activation", "h100", 0, call=True, final=False),
    row("repair", "Activation", "h100", 1, call=True, ok=True, speedup=3.0, cases=[(3, 1)]),
    row("repair", "Reduce", "h100", 0, call=False, final=False),
    row("repair", "Reduce", "h100", 1, call=True, final=False),
    row("repair", "Reduce", "h100", 2, call=True, ok=True, speedup=1.5, cases=[(9, 4), (1, 1)]),
    row("repair", "Fusion", "h100", 0, call=True, final=False),
    row("repair", "Fusion", "h100", 1, call=True, ok=True, speedup=0.8, cases=[(0.8, 1)]),
    # the same final kernels, re-evaluated on the second pool
    row("repair", "Activation", "a100", 1, call=True, ok=True, speedup=1.2, cases=[(1.2, 1)]),
    row("repair", "Reduce", "a100", 2, call=False),  # e.g. out of shared memory on this GPU
    row("repair", "Fusion", "a100", 1, call=True),   # e.g. a race that shows only here
]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    sink = ParquetSink(tmp_path / "results" / "sw")
    sink.write_evaluations(ONE_SHOT)
    sink.write_evaluations(REPAIR)
    return tmp_path / "results"


@pytest.fixture
def df(results: Path) -> pd.DataFrame:
    return load_evaluations([results / "sw"])[0]


def by(table: pd.DataFrame, **keys: str) -> pd.Series:
    mask = pd.Series(True, index=table.index)
    for k, v in keys.items():
        mask &= table[k] == v
    (i,) = table.index[mask]
    return table.loc[i]


def test_rates_by_method_are_per_pool_over_final_rows(df: pd.DataFrame) -> None:
    t = rate_table(df, BY_METHOD)
    assert t[["method", "hardware"]].values.tolist() == [
        ["one_shot", "a100"], ["one_shot", "h100"], ["repair", "a100"], ["repair", "h100"]]
    assert set(t["sweep_id"]) == {"sw"} and list(t["cells"]) == [3, 3, 3, 3]  # 16 rows, 12 final
    os_h = by(t, method="one_shot", hardware="h100")
    os_a = by(t, method="one_shot", hardware="a100")
    assert (os_h["call_rate"], os_h["exec_rate"]) == pytest.approx((2 / 3, 1 / 3))
    # fast_p is strict: the 2.0x kernel is fast_1 and fast_1p5 but not fast_2.
    assert (os_h["fast_1"], os_h["fast_1p5"], os_h["fast_2"]) == pytest.approx((1 / 3, 1 / 3, 0))
    assert os_h["geomean_speedup"] == pytest.approx(2.0)
    # the same kernel on the A100 is correct but slower than eager: no GPU is averaged in
    assert (os_a["exec_rate"], os_a["fast_1"]) == pytest.approx((1 / 3, 0))
    assert os_a["geomean_speedup"] == pytest.approx(0.5)
    rep_h = by(t, method="repair", hardware="h100")
    rep_a = by(t, method="repair", hardware="a100")
    assert (rep_h["call_rate"], rep_h["exec_rate"]) == (1, 1)
    # final speedups 3.0, 1.5, 0.8 on the H100: 1.5 is not > 1.5.
    assert (rep_h["fast_1"], rep_h["fast_1p5"], rep_h["fast_2"]) == \
        pytest.approx((2 / 3, 1 / 3, 1 / 3))
    assert rep_h["geomean_speedup"] == pytest.approx((3.0 * 1.5 * 0.8) ** (1 / 3))
    # on the A100 one final kernel does not run and one is wrong
    assert (rep_a["call_rate"], rep_a["exec_rate"], rep_a["fast_1"]) == \
        pytest.approx((2 / 3, 1 / 3, 1 / 3))
    assert rep_a["geomean_speedup"] == pytest.approx(1.2)


def test_rates_by_category(df: pd.DataFrame) -> None:
    t = rate_table(df, BY_CATEGORY)
    assert t[["category", "hardware"]].values.tolist() == [
        [c, h] for c in ("Activation", "Fusion", "Reduce") for h in ("a100", "h100")]
    act_h = by(t, category="Activation", hardware="h100")
    act_a = by(t, category="Activation", hardware="a100")
    assert (act_h["cells"], act_h["call_rate"], act_h["exec_rate"]) == (2, 1, 1)
    assert (act_h["fast_1"], act_h["fast_1p5"], act_h["fast_2"]) == pytest.approx((1, 1, 0.5))
    assert act_h["geomean_speedup"] == pytest.approx((2.0 * 3.0) ** 0.5)
    assert (act_a["fast_1"], act_a["fast_1p5"]) == pytest.approx((0.5, 0))
    assert act_a["geomean_speedup"] == pytest.approx((0.5 * 1.2) ** 0.5)
    red_h = by(t, category="Reduce", hardware="h100")
    red_a = by(t, category="Reduce", hardware="a100")
    assert (red_h["call_rate"], red_h["exec_rate"], red_h["fast_1"]) == pytest.approx((1, 0.5, 0.5))
    assert red_h["fast_1p5"] == 0 and red_h["geomean_speedup"] == pytest.approx(1.5)
    assert (red_a["call_rate"], red_a["exec_rate"]) == pytest.approx((0.5, 0))
    fus_h = by(t, category="Fusion", hardware="h100")
    assert (fus_h["call_rate"], fus_h["exec_rate"], fus_h["fast_1"]) == pytest.approx((0.5, 0.5, 0))
    assert fus_h["geomean_speedup"] == pytest.approx(0.8)


def test_study_speedup_metrics_sum_ratio_and_mean_of_task_ratios(df: pd.DataFrame) -> None:
    t = speedup_table(df, BY_HARDWARE)
    assert len(t) == 4
    os_h = by(t, method="one_shot", hardware="h100")
    assert (os_h["correct"], os_h["timed"]) == (1, 1)
    assert (os_h["sum_ratio"], os_h["mean_task_ratio"]) == pytest.approx((2.0, 2.0))
    assert os_h["slower_than_eager"] == 0 and os_h["mean_sol_fraction"] == pytest.approx(0.5)
    os_a = by(t, method="one_shot", hardware="a100")
    assert os_a["sum_ratio"] == pytest.approx(0.5) and os_a["slower_than_eager"] == 1
    rep_h = by(t, method="repair", hardware="h100")
    assert (rep_h["correct"], rep_h["timed"]) == (3, 3)
    # cases (3, 1) | (9, 4), (1, 1) | (0.8, 1): Σref = 13.8, Σgen = 7; task ratios 3, 2, 0.8.
    assert rep_h["sum_ratio"] == pytest.approx(13.8 / 7)
    assert rep_h["mean_task_ratio"] == pytest.approx((3 + 2 + 0.8) / 3)
    assert rep_h["geomean_speedup"] == pytest.approx((3.0 * 1.5 * 0.8) ** (1 / 3))
    assert rep_h["slower_than_eager"] == pytest.approx(1 / 3)
    assert math.isnan(rep_h["mean_sol_fraction"])  # no SOL recorded: NaN, not 0


def test_mean_task_ratio_weighs_each_task_once_whatever_its_samples(tmp_path: Path) -> None:
    """FIELD.md: the mean of per-task ratios. Three correct samples of one task at 2x and one of
    another at 0.5x give (2 + 0.5) / 2, not the mean over four kernels."""
    rows = [{**row("one_shot", "Activation", "h100", 0, call=True, ok=True, speedup=2.0,
                   cases=[(2, 1)], cand=f"relu-{i}"), "cell_id": f"relu|{i}", "sample": i}
            for i in range(3)]
    rows.append(row("one_shot", "Reduce", "h100", 0, call=True, ok=True, speedup=0.5,
                    cases=[(1, 2)]))
    ParquetSink(tmp_path / "s").write_evaluations(rows)
    df, _ = load_evaluations([tmp_path / "s"])
    t = speedup_table(df, BY_HARDWARE).iloc[0]
    assert t["mean_task_ratio"] == pytest.approx((2 + 0.5) / 2)
    assert t["sum_ratio"] == pytest.approx((6 + 1) / (3 + 2))


def test_case_sums_skip_untimed_cases() -> None:
    cases = json.dumps([{"ref_ms": 2, "cand_ms": 1}, {"ref_ms": None, "cand_ms": 5},
                        {"ref_ms": 3, "cand_ms": 0}, {"ref_ms": 4, "cand_ms": 4}])
    assert case_sums(cases) == (6, 5)
    assert case_sums("[]") is None and case_sums(None) is None and case_sums("{bad") is None


def test_state_after_k_is_the_methods_answer_from_its_first_k_rounds(df: pd.DataFrame) -> None:
    rep = df[df["method"] == "repair"]
    st = {k: state_after_k(rep, k).set_index("cell_id") for k in (0, 1, 2, 9)}
    assert all(len(s) == 3 for s in st.values())  # one per cell, on the primary pool
    assert set(st[0]["round"]) == {0} and set(st[9]["hardware"]) == {"h100"}
    assert st[1].loc["repair|reduce/sum", "round"] == 1
    assert st[9].loc["repair|reduce/sum", "round"] == 2
    assert st[9].loc["repair|activation/relu", "round"] == 1  # stopped after round 1: held
    # After the last round the state is each cell's final answer on its primary pool.
    final = rep[rep["final"] & (rep["hardware"] == "h100")].set_index("cell_id")["candidate_id"]
    assert st[2]["candidate_id"].sort_index().equals(final.sort_index())


def test_state_after_k_keeps_the_best_not_the_latest_and_separates_sweeps() -> None:
    def r(sweep: str, rnd: int, ok: bool, speedup: float | None, cand: str) -> dict:
        return dict(sweep_id=sweep, cell_id="c", hardware="h100", round=rnd, call_ok=True,
                    exec_ok=ok, speedup=speedup, stage="done" if ok else "correctness",
                    final=False, candidate_id=cand)

    rows = normalise(pd.DataFrame([
        r("s1", 0, True, 2.0, "fast"), r("s1", 1, True, 1.0, "slower"),
        r("s1", 2, False, None, "broken"),
        r("s2", 0, False, None, "s2-wrong"),  # another sweep, same cell id
    ]).reindex(columns=EVALUATION_SCHEMA.names))
    assert state_after_k(rows, 2)[["sweep_id", "candidate_id"]].values.tolist() == \
        [["s1", "fast"], ["s2", "s2-wrong"]]
    assert state_after_k(rows, 0)["candidate_id"].tolist() == ["fast", "s2-wrong"]
    assert state_after_k(rows, 0)["sweep_id"].tolist() == ["s1", "s2"]


def test_ablation_table_rates_after_k_rounds(df: pd.DataFrame) -> None:
    t = ablation_table(df)
    os_ = by(t, method="one_shot", k=0)
    assert os_["cells"] == 3 and len(t[t["method"] == "one_shot"]) == 1  # one round: one point
    assert os_[["call_rate", "exec_rate", "geomean_speedup"]].tolist() == \
        pytest.approx([2 / 3, 1 / 3, 2.0])
    rep = t[t["method"] == "repair"].set_index("k")
    assert list(rep.index) == [0, 1, 2] and set(rep["cells"]) == {3}
    assert rep["call_rate"].tolist() == pytest.approx([2 / 3, 1, 1])
    assert rep["exec_rate"].tolist() == pytest.approx([0, 2 / 3, 1])
    assert math.isnan(rep.loc[0, "geomean_speedup"])
    assert rep["geomean_speedup"].tolist()[1:] == pytest.approx([2.4 ** 0.5, 3.6 ** (1 / 3)])


def test_gpu_spread_compares_one_kernel_across_pools(df: pd.DataFrame) -> None:
    t = gpu_spread_table(df)
    # relu has two kernels correct on both pools: one-shot's (2.0 vs 0.5) and repair's (3.0 vs
    # 1.2); the task keeps its widest.
    assert t[["task_id", "candidate_id", "pools"]].values.tolist() == \
        [["activation/relu", "relu-os", 2]]
    r = t.iloc[0]
    assert (r["slowest_on"], r["fastest_on"]) == ("a100", "h100")
    assert (r["min_speedup"], r["max_speedup"], r["spread"]) == pytest.approx((0.5, 2.0, 4.0))


def test_two_sweeps_side_by_side_from_a_parent_dir(results: Path) -> None:
    other = ParquetSink(results / "sw2")
    other.write_evaluations([row("one_shot", "Activation", "h100", 0, call=True, ok=True,
                                 speedup=4.0, cases=[(4, 1)], sweep="sw2"),
                             row("one_shot", "Reduce", "h100", 0, call=False, sweep="sw2")])
    df, sources = load_evaluations([results])
    assert [s.sweep_id for s in sources] == ["sw", "sw2"] and [s.rows for s in sources] == [16, 2]
    t = compute_tables(df).by_method
    assert t[["sweep_id", "method", "hardware"]].values.tolist() == \
        [["sw", "one_shot", "a100"], ["sw", "one_shot", "h100"], ["sw", "repair", "a100"],
         ["sw", "repair", "h100"], ["sw2", "one_shot", "h100"]]
    sw2 = by(t, sweep_id="sw2")
    assert (sw2["cells"], sw2["exec_rate"], sw2["fast_2"]) == (2, 0.5, 0.5)
    # The same dir named twice (as parent and as sweep) is read once.
    assert find_sweep_dirs([results, results / "sw"]) == [results / "sw", results / "sw2"]


def test_missing_or_empty_dirs_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        find_sweep_dirs([tmp_path / "nope"])
    with pytest.raises(ReportError, match="no sweep results under .*run a sweep first"):
        find_sweep_dirs([tmp_path])


def test_untimed_sweep_leaves_fast_p_unknown_not_zero(tmp_path: Path) -> None:
    untimed = [{**r, "speedup": None, "sol_fraction": None, "cases": []} for r in ONE_SHOT]
    ParquetSink(tmp_path / "cpu").write_evaluations(untimed)
    df, _ = load_evaluations([tmp_path / "cpu"])
    t = rate_table(df, BY_METHOD).iloc[0]
    assert (t["call_rate"], t["exec_rate"]) == pytest.approx((2 / 3, 1 / 3))
    assert all(math.isnan(t[k]) for k in ("fast_1", "fast_1p5", "fast_2", "geomean_speedup"))
    fusion = by(rate_table(df, BY_CATEGORY), category="Fusion", hardware="h100")
    assert fusion["fast_1"] == 0  # nothing correct: not fast, and that is known
    s = speedup_table(df, BY_HARDWARE).iloc[0]
    assert s["correct"] == 1 and s["timed"] == 0 and math.isnan(s["sum_ratio"])



def test_a_task_edited_between_runs_counts_once_at_its_last_version(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = {**row("one_shot", "Activation", "h100", 0, call=False), "task_hash": "v1",
           "cell_id": "relu-v1", "finished_at": 1000.0}
    new = {**row("one_shot", "Activation", "h100", 0, call=True, ok=True, speedup=2.0,
                 cases=[(2, 1)]), "task_hash": "v2", "cell_id": "relu-v2", "finished_at": 2000.0}
    other = row("one_shot", "Reduce", "h100", 0, call=True)
    ParquetSink(tmp_path / "s").write_evaluations([old, new, other])
    with caplog.at_level("WARNING"):
        df, _ = load_evaluations([tmp_path / "s"])
    assert sorted(df.cell_id) == sorted(["relu-v2", other["cell_id"]])
    assert "1 rows of 1 task(s) evaluated under an earlier version" in caplog.text
    t = by(rate_table(df, BY_METHOD), method="one_shot", hardware="h100")
    assert (t["cells"], t["exec_rate"]) == (2, 0.5)
