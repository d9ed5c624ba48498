"""Prompt variants, templates, exemplars, and the method configs (presets, `base:`, sweep axes)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbx_ray.config import compose as config_mod
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import build_axes, count_cells, iter_cells
from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.prompting.extract import candidate_id
from kbx_ray.methods.base import REGISTRY, branches, check_method
from kbx_ray.prompting.prompts import (
    TemplateError, Templates, build_prompt, feedback, load_exemplars, pick_exemplars,
)
from kbx_ray.suites.builtin import get_task, load_suite
from kbx_ray.types import Candidate, CaseResult, EvalResult

PRESETS = sorted(p.stem for p in (config_mod.CONF_DIR / "method").glob("*.yaml"))


def test_exemplars_are_disjoint_from_the_suite():
    suite = load_suite()
    names = {t.name for t in suite}
    solutions = {Path(t.solution_path).read_text().strip() for t in suite if t.solution_path}
    exemplars = load_exemplars()
    assert len(exemplars) >= 3
    for e in exemplars:
        assert e.name not in names and e.task_id not in {t.task_id for t in suite}
        assert Path(e.solution_path).read_text().strip() not in solutions


@pytest.mark.slow  # starts a sandboxed CPU evaluator
def test_exemplar_kernels_pass_the_harness():
    ev = Evaluator(EvalConfig(device="cpu", seeds=1, case_timeout_s=60, load_timeout_s=120))
    try:
        for e in load_exemplars():
            code = Path(e.solution_path).read_text()
            res = ev.evaluate(e, Candidate(candidate_id(e.task_id, code), e.task_id, code, e.name))
            assert res.exec_ok, (e.task_id, res.error_kind, res.error_msg)
    finally:
        ev.close()


def test_few_shot_prompt_shows_exemplars_never_the_task_solution():
    task = get_task("reduce/sum")
    picked = pick_exemplars(task, 2)
    assert picked[0].category == "Reduce" and len(picked) == 2  # own category first
    text = build_prompt(task, exemplars=picked).messages[1]["content"]
    assert "## Example: row_max" in text and Path(picked[0].solution_path).read_text().strip() in text
    assert Path(task.solution_path).read_text().strip() not in text
    assert text.index("## Example") < text.index("# Task: reduce/sum")  # examples, then the task


def test_templates_can_be_overridden_by_name(tmp_path):
    (tmp_path / "system.txt").write_text("You write kernels for $task_id.")
    with pytest.raises(TemplateError, match=r"system.txt uses 'task_id'"):
        build_prompt(get_task("math/exp"), templates=Templates(tmp_path))
    (tmp_path / "system.txt").write_text("Terse kernel writer.")
    p = build_prompt(get_task("math/exp"), templates=Templates(tmp_path))
    assert p.messages[0]["content"] == "Terse kernel writer."
    assert "# Task: math/exp" in p.messages[1]["content"]  # the others fall back to conf/prompts
    with pytest.raises(TemplateError, match="is not a folder"):
        Templates(tmp_path / "nope")


def test_performance_feedback_reports_speedup_per_case_and_sol():
    r = EvalResult("activation/relu", "c", stage="done", call_ok=True, exec_ok=True, speedup=1.2,
                   sol_fraction=0.6, cases=[
                       CaseResult("fp32_16M", ok=True, cand_ms=0.5, ref_ms=0.6, speedup=1.2,
                                  sol_fraction=0.6)])
    text = feedback(r, ["performance"], Templates())
    assert "fp32_16M: 0.5000 ms vs eager 0.6000 ms, speedup 1.20x, 60.0% of the GPU's peak" in text
    assert "Geomean speedup 1.20x, geomean SOL fraction 60.0%" in text
    assert "speedup" not in feedback(r, ["compile"], Templates())


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_loads_and_names_a_method(preset):
    m = load_config([f"method={preset}"]).method
    assert check_method(m) is None and (m.kind or m.name) in REGISTRY and m.name == preset


def test_variants_inherit_from_their_base():
    geak = load_config(["method=geak"]).method
    assert (geak.kind, branches(geak), geak.rounds, geak.stop_when) == ("agentic", 4, 2, "fast")
    assert geak.feedback == ["compile", "correctness", "performance"]  # from repair, via agentic
    ka = load_config(["method=kernelagent", "method.rounds=2"]).method
    assert (ka.kind, branches(ka), ka.rounds, ka.stop_when) == ("parallel", 3, 2, "correct")
    # each method's options default what its preset once stated
    assert load_config(["method=few_shot"]).method.typed_options().exemplars == 2
    assert load_config(["method=cot"]).method.typed_options().cot is True
    assert branches(load_config(["method=best_of_n"]).method) == 4
    assert branches(load_config(["method=repair"]).method) == 1  # it takes no branches
    five = load_config(["method=geak", "method.options.branches=5"]).method
    assert branches(five) == 5 and five.typed_options().exemplars == 0


def test_a_base_loop_is_one_clear_line(tmp_path, monkeypatch):
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "a.yaml").write_text("base: b\nname: a\n")
    (tmp_path / "method" / "b.yaml").write_text("base: a\nname: b\n")
    monkeypatch.setattr(config_mod, "CONF_DIR", tmp_path)
    with pytest.raises(ConfigError, match=r"`base:` loops back \(a -> b -> a\)"):
        config_mod._load_group("method", "a")


@pytest.mark.parametrize("overrides, needle", [
    (["method.stop_when=soon"], "stop_when='soon'"),
    (["method.feedback=[compile,vibes]"], "method.feedback[1]='vibes' is not a choice: choose one "
     "of compile, correctness, performance"),
    (["method=repair", "method.rounds=-1"], "method.rounds=-1: choose 0 or more"),
    (["sweep.methods=[repair]", "sweep.rounds=[1,-2]"], "sweep.rounds[1]=-2: choose 0 or more"),
    (["method=few_shot", "method.options.exemplars=0"], "method few_shot: "
     "method.options.exemplars=0: choose 1 or more (method=one_shot takes none)"),
    (["method.kind=magic"], "unknown method 'magic'"),
    (["method.templates_dir=/nonexistent"], "is not a folder"),
])
def test_bad_method_settings_stop_before_anything_runs(overrides, needle):
    with pytest.raises(ConfigError) as e:  # a bad choice stops at loading, the others at the grid
        cfg = load_config(["suite.include=[math/exp]", *overrides])
        build_axes(cfg)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_sweep_presets_have_the_study_axes():
    tasks = load_suite(include=["activation/relu", "math/exp"])
    abl = load_config(["sweep=repair_ablation"])
    assert abl.sweep.rounds == list(range(11))
    assert count_cells(build_axes(abl), tasks) == 2 * len(abl.sweep.methods) * 11
    cells = list(iter_cells(build_axes(abl), tasks[:1], ["cpu"]))
    assert sorted({c.method.rounds for c in cells}) == list(range(11))
    assert len({c.cell_id for c in cells}) == len(cells)
    paper = load_config(["sweep=kbx_paper"])
    assert paper.hardware == ["rtx4090", "rtx5090", "a100", "h20", "h800", "l20"]
    assert len(paper.sweep.methods) == 5 and count_cells(build_axes(paper), tasks) == 2 * 5
    assert load_config(["sweep=kbx_paper", "hardware=cpu"]).hardware == ["cpu"]  # CLI wins


def test_agent_turn_survives_a_blank_error_message():
    """A failed candidate whose error message is only whitespace (a crash that printed nothing)
    must not take the agentic cell down with an IndexError."""
    from kbx_ray.methods.base import Attempt
    from kbx_ray.prompting.prompts import agent_prompt
    from kbx_ray.types import Generation

    task = get_task("activation/relu")
    first = build_prompt(task)

    def attempt(branch: int, result: EvalResult) -> Attempt:
        cand = Candidate(candidate_id(task.task_id, f"c{branch}"), task.task_id, "", "relu")
        return Attempt(1, first, Generation(text=""), cand, result, branch=branch)

    best = attempt(0, EvalResult(task.task_id, "c0", stage="correctness", call_ok=True,
                                 error_kind="mismatch", error_msg="wrong values"))
    blank = attempt(1, EvalResult(task.task_id, "c1", stage="compile", error_kind="crash",
                                  error_msg=" \n "))
    ask = agent_prompt(first, best, [best, blank], 2, ["compile", "correctness"], Templates())
    assert "- candidate 1: crash: " in ask.messages[-1]["content"]
