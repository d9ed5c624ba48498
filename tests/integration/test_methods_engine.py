"""Methods through the real engine (local Ray, evaluator actors, Parquet), driven by replay.

- The repair-round ablation: the curve computed from one R=3 run equals separate runs at k=0..3.
  The separate runs replay the R=3 run's own Parquet generations: a replay round-trip.
- Every preset in conf/method/ runs end to end and records one row per round and branch.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import ray

from kbx_ray.orchestration import engine
from kbx_ray.records.ablation import rounds_curve, rounds_state
from kbx_ray.config.compose import CONF_DIR, load_config
from kbx_ray.methods.base import branches
from kbx_ray.sinks import read_table

FIXTURES = Path(__file__).parents[1] / "fixtures" / "replay"
RELU = "suite.include=[activation/relu]"
PRESETS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
FAST = ["sink.wandb.mode=disabled", "evaluation.seeds=1"]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def sweep(out: Path, *overrides: str) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    p = engine.run_sweep(load_config([f"output_dir={out}", RELU, *FAST, *overrides]))
    return p.sweep_dir, read_table(p.sweep_dir, "generations"), read_table(p.sweep_dir, "evaluations")


def test_ablation_from_one_run_equals_separate_runs(local_ray, tmp_path):
    repair = ["model=replay", "method=repair", "method.stop_when=never"]
    one_dir, gen, one = sweep(tmp_path / "one", *repair, "method.rounds=3",
                              f"model.options.path={FIXTURES / 'relu_repair.jsonl'}")
    one = one.sort_values("round")
    assert list(one["round"]) == [0, 1, 2, 3] and len(gen) == 4
    assert list(one.error_kind) == ["syntax_error", "mismatch", "", ""]
    assert one.candidate_id.nunique() == 4  # round 3 is a distinct correct kernel
    assert list(one.parent_candidate_id)[1:] == list(one.candidate_id)[:-1]

    # The separate runs at k = 0, 1, 2 replay the R=3 run's own Parquet (a replay round-trip).
    _, regen, ev = sweep(tmp_path / "sep", *repair, "sweep.rounds=[0,1,2]",
                         f"model.options.path={one_dir}")
    by_round = dict(zip(gen["round"], gen.completion))
    assert all(by_round[r] == c for r, c in zip(regen["round"], regen.completion))
    runs = {int(ev[ev.cell_id == cid]["round"].max()): ev[ev.cell_id == cid]
            for cid in ev.cell_id.unique()}
    runs[3] = one
    assert sorted(runs) == [0, 1, 2, 3] and len(ev) == 1 + 2 + 3
    separate = pd.DataFrame([runs[k][runs[k].final.astype(bool)].iloc[0] for k in range(4)])
    assert list(separate.call_ok) == [False, True, True, True]
    assert list(separate.exec_ok) == [False, False, True, True]

    cols = ["candidate_id", "call_ok", "exec_ok", "error_kind", "speedup"]
    state = rounds_state(one).set_index("k")
    for k in range(4):
        plain = lambda d: {c: (None if pd.isna(v) else v) for c, v in d.items()}  # noqa: E731
        assert plain(state.loc[k, cols].to_dict()) == plain(separate.iloc[k][cols].to_dict()), k
    curve = rounds_curve(one).set_index("k")
    assert list(curve.call_rate) == [float(v) for v in separate.call_ok]
    assert list(curve.exec_rate) == [float(v) for v in separate.exec_ok]


def expected_branches(cfg) -> dict[int, tuple[int, str]]:
    """branch -> (last round, stop reason) when only round 0 / branch 0 answers, correctly."""
    kind, n = cfg.kind or cfg.name, branches(cfg)
    if kind in ("one_shot", "few_shot", "cot", "best_of_n"):
        return {b: (0, "max_rounds") for b in range(n)}
    if getattr(cfg, "stop_when", "correct") in ("fast", "never"):  # fast is never met on a CPU: every round runs
        return {b: (cfg.rounds, "max_rounds") for b in range(n)}
    return {b: (0, "correct") if b == 0 else (cfg.rounds, "max_rounds")  # repair, parallel
            for b in range(n)}


def test_every_preset_runs_through_the_engine(local_ray, tmp_path):
    replay = tmp_path / "gen.jsonl"
    row = json.loads((FIXTURES / "relu_repair.jsonl").read_text().splitlines()[2])  # correct
    replay.write_text(json.dumps({**row, "round": 0}) + "\n")  # round 0, branch 0; then no code
    _, gen, ev = sweep(tmp_path / "out", "model=replay", f"model.options.path={replay}",
                    "model.options.on_missing=skip", f"sweep.methods=[{','.join(PRESETS)}]")
    assert sorted(ev.method.unique()) == PRESETS and len(gen) == len(ev)
    for method, rows in ev.groupby("method"):
        cfg = load_config([f"method={method}"]).method
        assert rows.cell_id.nunique() == 1 and rows.final.astype(bool).sum() == 1, method
        final = rows[rows.final.astype(bool)].iloc[0]
        assert final["exec_ok"] and (final["round"], final["branch"]) == (0, 0), method
        misses = rows[(rows["round"] > 0) | (rows.branch > 0)]
        assert (misses.error_kind == "no_code_block").all(), method
        last = rows.loc[rows.groupby("branch")["round"].idxmax()]
        got = {int(r.branch): (int(r["round"]), r.stop_reason) for _, r in last.iterrows()}
        assert got == expected_branches(cfg), method
        assert len(rows) == sum(r + 1 for r, _ in got.values()), method  # a row per round
        assert (rows.stop_reason[~rows.index.isin(last.index)] == "").all(), method
    assert len(ev[ev.method == "geak"]) == 3 * 4 and len(ev[ev.method == "kernelagent"]) == 1 + 2 * 6
    prompts = gen.set_index("method").prompt
    assert "## Example:" in prompts["few_shot"] and "step by step" in prompts["cot"]
