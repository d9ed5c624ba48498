import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.records.sweep_folder import sweep_id
from kbx_ray.orchestration.grid import build_axes, iter_cells
from kbx_ray.errors import SuiteError
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import select_ids


def test_defaults():
    cfg = load_config([])
    assert (cfg.model.backend, cfg.method.name, cfg.hardware) == ("reference", "one_shot", ["auto"])
    assert cfg.output_dir == "results" and cfg.sink["wandb"]["mode"] == "offline"


def test_overrides_and_groups():
    cfg = load_config(["output_dir=/tmp/x", "suite.include=[math,activation/relu]", "hardware=h200",
                       "evaluation.seeds=5", "model=reference"])
    assert cfg.output_dir == "/tmp/x" and cfg.suite.include == ["math", "activation/relu"]
    assert cfg.hardware == ["h200"] and cfg.evaluation.seeds == 5


@pytest.mark.parametrize("overrides, needle", [
    (["nosuchkey=1"], "nosuchkey"),
    (["evaluation.nosuch=1"], "nosuch"),
    (["evaluation.seeds=many"], "seeds"),
    (["model=gpt-17"], "unknown model 'gpt-17'"),
    (["method=nope"], "unknown method 'nope'"),
    (["justaword"], "not key=value"),
    (["wandb.mode=disabled"], "wandb in the command line has moved: set sink.wandb.<key> (e.g. "
     "sink.wandb.mode=disabled)"),
])
def test_bad_config_is_one_clear_line(overrides, needle):
    with pytest.raises(ConfigError) as e:
        load_config(overrides)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_unknown_task_names_the_pattern():
    with pytest.raises(SuiteError, match="unknown task 'activation/nope'"):
        load_suite(include=["activation/nope"])


def test_selection_by_id_category_and_glob():
    ids = ["activation/relu", "math/exp", "math/log", "fusion/add_gelu"]
    assert select_ids(ids, ["math"]) == ["math/exp", "math/log"]
    assert select_ids(ids, ["fusion/*", "activation/relu"]) == ["activation/relu", "fusion/add_gelu"]


def test_sweep_id_is_stable_and_ignores_task_selection(tmp_path, monkeypatch):
    a = sweep_id(load_config([]))
    assert a == sweep_id(load_config([])) and a.startswith("one_shot-reference-kbx-")
    assert a == sweep_id(load_config(["suite.include=[math]"]))
    assert a != sweep_id(load_config(["hardware=h200"]))
    assert sweep_id(load_config(["sweep_id=mine"])) == "mine"
    # what a row would say differs: another sweep, never a resume that skips cells judged otherwise
    for other in (["engine.mode=noop"], ["evaluation.torch_compute=flag"], ["evaluation.seeds=1"],
                  ["evaluation.timing.budget_s=3"], ["evaluation.device=cpu"]):
        assert sweep_id(load_config(other)) != a, other
    # an edited method preset or prompt template is another sweep too
    edited = tmp_path / "prompts"
    edited.mkdir()
    (edited / "system.txt").write_text("You write Triton kernels. Be brief.")
    assert sweep_id(load_config([f"method.templates_dir={edited}"])) != \
        sweep_id(load_config([f"method.templates_dir={tmp_path}"]))
    import shutil

    import kbx_ray.config.compose as config

    before = sweep_id(load_config(["sweep.methods=[repair]"]))
    shutil.copytree(config.CONF_DIR, tmp_path / "conf")
    preset = tmp_path / "conf" / "method" / "repair.yaml"
    preset.write_text(preset.read_text().replace("rounds: 3", "rounds: 5"))
    monkeypatch.setattr(config, "CONF_DIR", tmp_path / "conf")
    assert sweep_id(load_config(["sweep.methods=[repair]"])) != before
    monkeypatch.undo()
    # operational settings resume into the same sweep (a longer timeout for the cells left)
    for same in (["evaluation.case_timeout_s=600"], ["engine.mode=task"],
                 ["evaluation.sandbox.cpu_seconds=60"], ["engine.evaluators_per_gpu=2"]):
        assert sweep_id(load_config(same)) == a, same


def test_cells_are_stable_and_distinct():
    cfg = load_config(["sweep.samples=2"])
    tasks = load_suite(include=["activation/relu", "math/exp"])
    cells = list(iter_cells(build_axes(cfg), tasks, ["cpu", "h200"]))
    assert len(cells) == 2 * 2 and all(c.hardware == ("cpu", "h200") for c in cells)
    assert len({c.cell_id for c in cells}) == len(cells)
    again = iter_cells(build_axes(cfg), tasks, ["cpu", "h200"])
    assert [c.cell_id for c in cells] == [c.cell_id for c in again]


def test_cell_ids_are_the_stable_hash_of_their_parts():
    """iter_cells hashes a shared prefix once per task; the ids must stay what resume recorded
    (method and model as laid out before their options were typed: test_config_ids.py)."""
    from kbx_ray.types import stable_hash

    cfg = load_config(["sweep.samples=3", "sweep.methods=[one_shot,repair]", "sweep.rounds=[1,3]"])
    tasks = {t.task_id: t for t in load_suite(include=["activation/relu", "math/exp"])}
    cells = list(iter_cells(build_axes(cfg), list(tasks.values()), ["cpu", "h200"]))
    assert len(cells) == 2 * 3 * 3
    for c in cells:
        t = tasks[c.task_id]
        parts = [x.hashed() for x in (c.method, c.model)]
        assert c.cell_id == stable_hash(t.task_id, t.task_hash, *parts, c.sample, c.hardware)


def test_each_budget_of_a_rounds_axis_is_its_own_method_label():
    """Rows carry the method's name only, so two budgets under one name would pool in every table
    and dashboard: a rounds axis with several values names them `<method>@R<k>`."""
    cfg = load_config(["sweep.methods=[one_shot,repair]", "sweep.rounds=[1,3]"])
    tasks = list(load_suite(include=["activation/relu"]))
    methods = {(c.method.name, c.method.kind, c.method.rounds)
               for c in iter_cells(build_axes(cfg), tasks, ["cpu"])}
    # one_shot runs no rounds: one variant, not a duplicate per budget
    assert methods == {("one_shot", "", 0), ("repair@R1", "repair", 1), ("repair@R3", "repair", 3)}
    one = load_config(["method=repair", "sweep.rounds=[2]"])
    assert {(c.method.name, c.method.rounds)
            for c in iter_cells(build_axes(one), tasks, ["cpu"])} == {("repair", 2)}


def test_evaluators_per_gpu_is_bounded():
    assert load_config(["engine.evaluators_per_gpu=4"]).engine.evaluators_per_gpu == 4
    with pytest.raises(ConfigError, match="evaluators_per_gpu=0"):
        load_config(["engine.evaluators_per_gpu=0"])


@pytest.mark.parametrize("key,bad,rule", [
    ("max_concurrency", -1, "0 or more"), ("max_evaluators", 0, "1 or more"),
    ("evaluators", -2, "0 or more"), ("eval_batch", -1, "0 or more"),
    ("flush_every", 0, "1 or more"), ("flush_s", -1.0, "0 or more"),
    ("flush_min_s", -0.5, "0 or more"), ("compile_workers", 0, "1 or more"),
    ("compile_timeout_s", 0.0, "1 or more"), ("actor_ready_s", 0.0, "1 or more"),
    ("pool_wait_s", -1.0, "0 or more")])
def test_engine_sizes_are_bounded_at_loading(key, bad, rule):
    """A size the engine would hang or divide on fails when the config loads, in one line."""
    with pytest.raises(ConfigError, match=rf"^engine.{key}={bad}: choose {rule}$"):
        load_config([f"engine.{key}={bad}"])


def test_retries_are_bounded_at_loading_not_at_the_first_lost_evaluator():
    assert load_config(["engine.retries=0"]).engine.retries == 0
    with pytest.raises(ConfigError, match=r"^engine.retries=-1: choose 0 or more$"):
        load_config(["engine.retries=-1"])


@pytest.mark.parametrize("value,mode", [("on", "on"), ("off", "off"), ("always", "always"),
                                        ("true", "on"), ("false", "off")])
def test_aot_compile_modes_survive_the_yaml_booleans(value, mode):
    assert load_config([f"engine.aot_compile={value}"]).engine.aot_compile == mode


def test_aot_compile_unknown_mode_is_one_line():
    with pytest.raises(ConfigError, match=r"^engine.aot_compile='sometimes' is not a choice: "
                       r"choose one of off, on, always$"):
        load_config(["engine.aot_compile=sometimes"])
