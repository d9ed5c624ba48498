"""What the command line says is what the cells run: overrides under grid axes, refusals, the
rounds axis, choice validation, readable sweep ids, and the dry-run's estimate."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.records.sweep_folder import sweep_id
from kbx_ray.orchestration.grid import build_axes, iter_cells
from kbx_ray.config.preflight import validate
from kbx_ray.llm.vllm_spec import engine_arg_names
from kbx_ray.suites.builtin import load_suite

TASKS = ["activation/relu", "math/exp"]


def cells(overrides: list[str], pools: tuple[str, ...] = ("cpu",)):
    return list(iter_cells(build_axes(load_config(overrides)), load_suite(include=TASKS),
                           list(pools)))


def test_a_model_key_reaches_every_model_of_the_axis():
    got = cells(["sweep.models=[qwen2.5-coder-7b,qwen2.5-coder-32b]", "model.temperature=0.7",
                 "model.max_tokens=512"])
    assert {c.model.name for c in got} == {"qwen2.5-coder-7b", "qwen2.5-coder-32b"}
    assert {(c.model.temperature, c.model.max_tokens) for c in got} == {(0.7, 512)}
    # the presets' own keys survive: only the given keys change
    assert {c.model.path for c in got} == {"Qwen/Qwen2.5-Coder-7B-Instruct",
                                           "Qwen/Qwen2.5-Coder-32B-Instruct"}
    plain = cells(["sweep.models=[qwen2.5-coder-7b,qwen2.5-coder-32b]"])
    assert {c.model.temperature for c in plain} == {0.0}
    assert {c.cell_id for c in got}.isdisjoint(c.cell_id for c in plain)  # another grid


def test_a_method_key_reaches_every_method_of_the_ablation():
    got = cells(["sweep=repair_ablation", "method.stop_when=never", "method.feedback=[compile]"])
    assert {c.method.stop_when for c in got} == {"never"}
    assert {tuple(c.method.feedback) for c in got} == {("compile",)}
    assert {c.method.name for c in got} >= {"repair@R0", "kernelagent@R10", "geak@R3"}
    assert {c.method.rounds for c in got} == set(range(11))  # the axis still sets the budget
    assert {c.method.stop_when for c in cells(["sweep=repair_ablation"])} == {"correct", "fast"}


@pytest.mark.parametrize("overrides, needle", [
    (["sweep.models=[tiny,reference]", "model=openai"],
     "model=openai has no effect: the sweep's models axis is [tiny, reference]"),
    (["sweep=kbx_paper", "method=repair"], "method=repair has no effect"),
    (["sweep=repair_ablation", "method.rounds=3"], "method.rounds=3 conflicts with the sweep's "
     "rounds axis"),
    (["sweep.methods=[repair,cot]", "method.name=mine"], "method.name cannot label every variant"),
])
def test_what_an_axis_would_override_is_refused_in_one_line(overrides, needle):
    with pytest.raises(ConfigError) as e:
        load_config(overrides)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_rounds_axis_leaves_methods_without_rounds_alone():
    cfg = load_config(["sweep.methods=[few_shot,cot,repair,agentic]", "sweep.rounds=[0,2]"])
    names = [m.name for m in build_axes(cfg).methods]
    assert names == ["few_shot", "cot", "repair@R0", "repair@R2", "agentic@R0", "agentic@R2"]
    got = cells(["sweep.methods=[few_shot,repair]", "sweep.rounds=[0,2]"])
    assert len(got) == len(TASKS) * 3 and len({c.cell_id for c in got}) == len(got)


@pytest.mark.parametrize("override, key", [
    ("evaluation.torch_compute=fial", "evaluation.torch_compute='fial'"),
    ("evaluation.small_only=maybe", "evaluation.small_only='maybe'"),
    ("evaluation.timing_cases=some", "evaluation.timing_cases='some'"),
    ("evaluation.sandbox.landlock=strict", "evaluation.sandbox.landlock='strict'"),
    ("evaluation.device=tpu", "evaluation.device='tpu'"),
    ("sink.wandb.mode=onlin", "sink.wandb.mode='onlin'"),
    ("engine.mode=fast", "engine.mode='fast'"),
    ("evaluation.timing.feed=pushed", "timing feed 'pushed'"),
])
def test_every_choice_key_is_checked(override, key):
    with pytest.raises(ConfigError) as e:
        validate(load_config([override]))  # a sink's options are typed when they are checked
    msg = str(e.value)
    assert key in msg and "\n" not in msg and "one of" in msg, msg


def test_boolean_spellings_mean_the_choice_they_name():
    """`landlock=on` is the YAML boolean True to OmegaConf; it once switched Landlock off."""
    cfg = load_config(["evaluation.sandbox.landlock=on", "evaluation.small_only=true"])
    assert cfg.evaluation.sandbox.landlock == "on" and cfg.evaluation.small_only == "true"
    cfg = load_config(["evaluation.sandbox.landlock=off", "evaluation.small_only=false"])
    assert cfg.evaluation.sandbox.landlock == "off" and cfg.evaluation.small_only == "false"


@pytest.mark.parametrize("overrides, needle", [
    (["model=openai", "model.options.concurency=3"], "unknown key model.options.concurency in model "
     "openai: did you mean model.options.concurrency?"),
    (["model=replay", "model.options.pth=x"], "unknown key model.options.pth in model replay: did "
     "you mean model.options.path?"),
    (["model=reference", "model.options.x=1"], "unknown key model.options.x in model reference: "
     "model.options takes no keys"),
    (["model=reference", "model.engine.dtype=float32"], "model.engine in the command line has "
     "moved: set model.options.engine.<key> (the vllm backend's options)"),
    (["model.backend=vlm"], "unknown backend 'vlm'"),
    (["model=tiny", "model.options.placement.gpus=1"], "unknown key model.options.placement.gpus in "
     "model tiny: did you mean model.options.placement.num_gpus?"),
    (["suite.options.x=1"], "unknown key suite.options.x in suite kbx: suite.options takes no keys"),
])
def test_backend_option_keys_are_checked(overrides, needle):
    with pytest.raises(ConfigError) as e:
        validate(load_config(overrides))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_vllm_engine_key_typo_names_the_near_argument(tmp_path: Path):
    with pytest.raises(ConfigError, match="^unknown key model.options.engine.max_modle_len in model "
                       "tiny: did you mean model.options.engine.max_model_len\\?$"):
        validate(load_config(["model=tiny", f"model.path={tmp_path}",
                              "model.options.engine.max_modle_len=3"]))
    validate(load_config(["model=tiny", f"model.path={tmp_path}"]))  # the preset's keys are real
    if not engine_arg_names():
        pytest.skip("vllm is not installed: engine.args keys are checked where it is")
    with pytest.raises(ConfigError, match="engine.args.max_modle_len .*did you mean max_model_len"):
        validate(load_config(["model=tiny", f"model.path={tmp_path}",
                              "model.options.engine.args.max_modle_len=3"]))
    validate(load_config(["model=tiny", f"model.path={tmp_path}",
                          "model.options.engine.args.max_logprobs=5"]))


def test_missing_local_model_names_the_command_that_builds_it(tmp_path: Path):
    missing = tmp_path / "no-model"
    with pytest.raises(ConfigError) as e:
        validate(load_config(["model=tiny", f"model.path={missing}"]))
    assert str(e.value) == (f"model tiny: weights folder {missing} does not exist: build it with "
                            f"`python tests/fixtures/tiny_model.py {missing}`")


def test_sweep_ids_are_readable_and_old_folders_resume(tmp_path: Path):
    cfg = load_config([f"output_dir={tmp_path}"])
    sid = sweep_id(cfg)
    assert sid.startswith("one_shot-reference-kbx-") and len(sid.rsplit("-", 1)[1]) == 8
    assert sweep_id(load_config([f"output_dir={tmp_path}", "method=repair",
                                 "model=qwen2.5-coder-7b"])).startswith("repair-qwen2.5-coder-7b-")
    assert sweep_id(load_config([f"output_dir={tmp_path}", "sweep=repair_ablation"])).startswith(
        "repair_ablation-reference-kbx-")
    three = sweep_id(load_config([f"output_dir={tmp_path}", "sweep.models=[tiny,reference,openai]"]))
    assert three.startswith("one_shot-3models-kbx-")
    legacy = tmp_path / f"default-{sid.rsplit('-', 1)[1]}"  # a folder named before
    legacy.mkdir()
    assert sweep_id(cfg) == legacy.name


def test_dry_run_counts_the_rounds_axis_per_method_and_pool():
    from kbx_ray.orchestration import engine

    cfg = load_config(["sweep=repair_ablation", "hardware=[h100,a100]",
                       "suite.include=[activation/relu,math/exp]"])
    p = engine.plan(cfg)
    text = engine.describe(p)
    lines = text.splitlines()
    assert p.n_cells == 2 * 3 * 11 and f"{p.n_cells} cells" in lines[0]
    r10 = next(line for line in lines if line.strip().startswith("method repair@R10:"))
    # 2 cells x 11 rounds on the primary pool, and each final kernel once more on a100
    assert "up to 11 round(s) x 1 branch(es): 24 evaluations" in r10
    geak = next(line for line in lines if line.strip().startswith("method geak@R2:"))
    assert "up to 3 round(s) x 4 branch(es): 26 evaluations" in geak
    h100 = next(line for line in lines if line.strip().startswith("pool h100"))
    a100 = next(line for line in lines if line.strip().startswith("pool a100"))
    per_cell = sum((r + 1) * b for r in range(11) for b in (1, 3, 4))  # repair, kernelagent, geak
    assert f"{2 * per_cell} evaluations" in h100 and f"{p.n_cells} evaluations" in a100
    hours = float(lines[0].split("at most ")[1].split(" GPU-hours")[0])
    cases = sum(len(t.cases) for t in p.tasks.values()) / len(p.tasks)
    expect = (2 * per_cell + p.n_cells) * cases * (2 * cfg.evaluation.timing.budget_s + 0.2) / 3600
    assert hours == pytest.approx(expect, abs=0.01)
