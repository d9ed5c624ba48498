"""The one typed schema (config/structured.py): defaults, choices, errors and help all come from
it."""
from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from omegaconf import OmegaConf

from kbx_ray.cli.commands import build_parser
from kbx_ray.config.compose import CONF_DIR, choice_keys, default_yaml, load_config
from kbx_ray.config.schema import bounded, out_of_bounds, typed
from kbx_ray.config.structured import AotCompile, Config, EngineMode, Feedback, StopWhen
from kbx_ray.errors import ConfigError
from kbx_ray.evaluate.settings import Landlock
from kbx_ray.config.preflight import validate
from kbx_ray.sinks.wandb_settings import WandbConfig, WandbMode


def test_conf_config_yaml_shows_every_default_of_the_schema():
    """Generate-and-compare: conf/config.yaml holds exactly the schema's keys at their defaults,
    and under `sink` each registered sink's options at theirs (regenerate it with
    config.default_yaml() after changing one)."""
    on_disk = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))
    schema = OmegaConf.to_container(OmegaConf.structured(Config), enum_to_str=True)
    schema["sink"] = {"wandb": OmegaConf.to_container(OmegaConf.structured(WandbConfig),
                                                      enum_to_str=True)}
    assert on_disk == schema, "conf/config.yaml differs from the schema's defaults: regenerate it"
    assert OmegaConf.to_container(OmegaConf.create(default_yaml())) == schema


def test_choice_fields_are_enums_and_their_values_read_as_text():
    cfg = load_config(["engine.mode=task", "method.stop_when=fast", "sink.wandb.mode=disabled",
                       "evaluation.sandbox.landlock=off"])
    assert cfg.engine.mode is EngineMode.task and cfg.method.stop_when is StopWhen.fast
    assert validate(cfg).sinks["wandb"].mode is WandbMode.disabled
    assert cfg.evaluation.sandbox.landlock is Landlock.off
    # a member is its spelling wherever the code compares, formats or hashes it
    assert cfg.engine.mode == "task" and f"{cfg.method.stop_when}" == "fast"


@pytest.mark.parametrize("override, value", [
    ("engine.aot_compile=on", AotCompile.on), ("engine.aot_compile=true", AotCompile.on),
    ("engine.aot_compile=false", AotCompile.off), ("evaluation.sandbox.landlock=on", "on"),
    ("evaluation.sandbox.landlock=off", "off"), ("evaluation.small_only=true", "true"),
])
def test_booleans_the_grammar_reads_are_spelled_back_to_the_choice(override, value):
    key = override.split("=")[0]
    assert OmegaConf.select(OmegaConf.structured(load_config([override])), key) == value


@pytest.mark.parametrize("override, line", [
    ("method.stop_when=neve",
     "method.stop_when='neve' is not a choice: choose one of correct, fast, never "
     "(did you mean never?)"),
    ("engine.mode=actr",
     "engine.mode='actr' is not a choice: choose one of actor, task, noop (did you mean actor?)"),
    ("evaluation.device=xla", "evaluation.device='xla' is not a choice: choose one of auto, cuda, "
     "cpu"),
    ("evaluation.sandbox.landlock=of", "evaluation.sandbox.landlock='of' is not a choice: choose "
     "one of auto, on, off (did you mean off?)"),
    ("engine.mdoe=task", "unknown key engine.mdoe in the command line: did you mean engine.mode?"),
    ("evaluation.timing.budgte_s=2", "unknown key evaluation.timing.budgte_s in the command line: "
     "did you mean evaluation.timing.budget_s?"),
])
def test_schema_errors_are_one_line_with_the_nearest_choice_or_key(override, line):
    with pytest.raises(ConfigError) as e:
        load_config([override])
    assert str(e.value) == line


def test_an_unknown_key_with_nothing_near_lists_the_known_ones():
    with pytest.raises(ConfigError) as e:
        load_config(["sweep.zzz=1"])
    assert str(e.value) == ("unknown key sweep.zzz in the command line: sweep takes name, methods, "
                            "models, samples, rounds, hardware")


def test_validate_types_a_config_edited_in_code_against_the_same_schema():
    cfg = load_config([])
    cfg.engine = replace(cfg.engine, mode="noop")  # a string that names a member: fine
    validate(cfg)
    cfg.engine = replace(cfg.engine, mode="nop")
    with pytest.raises(ConfigError, match=r"^engine.mode='nop' is not a choice: .*noop"):
        validate(cfg)
    cfg = load_config([])
    cfg.evaluation.sandbox = replace(cfg.evaluation.sandbox, landlock="strict")
    with pytest.raises(ConfigError, match=r"^evaluation.sandbox.landlock='strict' is not a choice"):
        validate(cfg)


def test_the_help_lists_every_choice_key_of_the_schema_with_its_default():
    sweep = build_parser()._subparsers._group_actions[0].choices["sweep"]  # type: ignore[union-attr]
    text = sweep.format_help()
    keys = choice_keys()
    assert {k for k, _, _ in keys} >= {"engine.mode", "engine.aot_compile", "method.stop_when",
                                       "method.feedback",
                                       "sink.wandb.mode", "evaluation.device",
                                       "evaluation.sandbox.landlock"}
    for key, enum, default in keys:
        assert f"{key}={'|'.join(enum.__members__)}  (default: {default})" in text
    assert "engine.aot_compile=off|on|always  (default: off)" in text
    assert ("method.feedback=compile|correctness|performance  (default: "
            "[compile,correctness,performance])") in text


@pytest.mark.parametrize("overrides, line", [
    (["model=replay", "model.options.path=x", "model.options.on_missing=ignore"],
     "model.options.on_missing='ignore' is not a choice: choose one of error, skip"),
    (["model=replay", "model.options.path=x", "model.options.duplicates=frist"],
     "model.options.duplicates='frist' is not a choice: choose one of error, first, last "
     "(did you mean first?)"),
    (["model.backend=mutants", "model.name=m", "model.options.per_operator=abc"],
     "bad config in model m: model.options.per_operator: Value 'abc' of type 'str' could not be "
     "converted to Integer"),
    (["model=replay", "model.options.pth=x"], "unknown key model.options.pth in model replay: did "
     "you mean model.options.path?"),
    (["model=tiny", "model.options.engine.max_num_seqs=many"], "bad config in model tiny: "
     "model.options.engine.max_num_seqs: Value 'many' of type 'str' could not be converted to "
     "Integer"),
    (["model=tiny", "model.options.placement.num_gpus=3"], "bad model.options in model tiny: "
     "placement.num_gpus=3 must be 0 (CPU) or engine.tensor_parallel_size=1"),
    (["model=openai", "model.options.timeout=5"], "unknown key model.options.timeout in model "
     "openai: did you mean model.options.timeout_s?"),
    (["method=parallel", "method.options.branches=0"], "method parallel: "
     "method.options.branches=0: choose 1 or more"),
    (["method=repair", "method.options.branches=2"], "unknown key method.options.branches in method "
     "repair: method.options takes exemplars, cot"),
])
def test_backend_options_are_typed_by_the_dataclass_the_backend_registered(overrides, line):
    with pytest.raises(ConfigError) as e:
        validate(load_config(overrides))
    assert str(e.value) == line



def test_a_list_of_choices_is_typed_item_by_item_and_reads_as_text():
    cfg = load_config(["method=repair", "method.feedback=[compile,performance]"])
    assert cfg.method.feedback == [Feedback.compile, Feedback.performance]
    assert cfg.method.feedback == ["compile", "performance"]  # hashed and compared as before


def test_bounds_hold_wherever_a_config_is_typed():
    """Loading, `validate` (a config edited in code) and `check_method` (a method made in code)
    all refuse a value out of a `bounded` field's range, in one line naming the key."""
    from kbx_ray.methods.base import check_method

    cfg = load_config([])
    cfg.method = replace(cfg.method, rounds=-1)
    with pytest.raises(ConfigError, match=r"^method.rounds=-1: choose 0 or more$"):
        validate(cfg)
    cfg = load_config([])
    cfg.engine = replace(cfg.engine, evaluators_per_gpu=17)
    with pytest.raises(ConfigError, match=r"^engine.evaluators_per_gpu=17: choose 1-16 \("):
        validate(cfg)
    method = load_config(["method=repair"]).method
    assert check_method(replace(method, rounds=-2)) == (
        "method repair: method.rounds=-2: choose 0 or more")
    assert check_method(replace(method, feedback=["vibes"])) == (
        "method.feedback[0]='vibes' is not a choice: choose one of compile, correctness, "
        "performance")
    assert check_method(method) is None


@dataclass
class _Base:
    n: int = bounded(1, low=1)
    share: float = bounded(0.5, 0.0, 1.0, why="a fraction")
    sizes: list[int] = bounded([2], low=1)


@dataclass
class _Sub(_Base):
    n: int = 4                  # another default, the base's bound


@pytest.mark.parametrize("given, line", [
    ({}, None),
    ({"n": 0}, "x.n=0: choose 1 or more"),
    ({"share": 1.5}, "x.share=1.5: choose 0.0-1.0 (a fraction)"),
    ({"sizes": [3, 0]}, "x.sizes[1]=0: choose 1 or more"),
])
def test_a_bound_is_field_metadata_that_a_subclass_keeps(given, line):
    for schema in (_Base, _Sub):
        assert out_of_bounds(schema(**given), "x.") == line
        if line:
            with pytest.raises(ConfigError) as e:
                typed(schema, given, "x.", "the test")
            assert str(e.value) == f"the test: {line}"
