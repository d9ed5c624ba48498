"""Structured configs (OmegaConf), `key=value` overrides, config groups, and sweep expansion.

Hydra is not used (hydra-core 1.3 pins omegaconf < 2.4), so this module does the little of it we
need: `group=name` picks conf/<group>/<name>.yaml, other `a.b=v` items override keys, and every
mistake becomes one `ConfigError` line that names the key and the fix. The grid (variants, cells)
is in grid.py, and the sweep's id and folder record in sweep_folder.py; both import this module,
never the reverse. ConfigError lives in errors.py (a leaf) and is importable from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kbx_ray.errors import ConfigError
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.identity import RUN, exempt, verdict, walk
from kbx_ray.schema import Choice, Optioned, choice_fields, explain, spell_booleans

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("suite", "model", "method", "sweep")
_SETUP: dict[str, str] = {}  # model preset name -> the command that makes its local files


class StopWhen(Choice):
    correct = "correct"      # stop at the first correct candidate
    fast = "fast"            # ... correct and speedup >= method.fast_speedup
    never = "never"          # every round runs


class EngineMode(Choice):
    actor = "actor"          # warm evaluator actors
    task = "task"            # a fresh process per candidate
    noop = "noop"            # instant made-up verdicts (engine overhead benchmark)


class AotCompile(Choice):
    off = "off"
    on = "on"                # while a compile worker is free; used if ready in time
    always = "always"


@dataclass
class SuiteConfig(Optioned):
    KIND, KEY, ENTRY = "suite", "suite", "name"
    name: str = verdict("kbx")           # kbx (tasks/) | kernelbench | kernelbenchx (suites/)
    path: str | None = verdict(None)     # suite root; default: the repo's tasks/
    include: list[str] = exempt([], why="adding tasks resumes into the same sweep: a task's "
                                "cells have their own ids")  # ids, category folders or globs
    options: dict[str, Any] = verdict({}, omit_empty=True)  # the format's (its options=)


@dataclass
class ModelConfig(Optioned):
    KIND, KEY, ENTRY = "backend", "model", "backend"
    # keys moved into `options` (backend's), with their default then: ids hash them so (Optioned)
    LIFTED = {"base_url": None, "api_key_env": None, "replicas": 1, "engine": {}, "placement": {}}
    MOVED = {**{k: f"set model.options.{k}{'.<key>' * (k in ('engine', 'placement'))} (the vllm "
                   "backend's options)" for k in ("engine", "placement", "replicas")},
             **{k: f"set model.options.{k} (the openai backend's options)"
                for k in ("base_url", "api_key_env")}}
    name: str = "reference"              # label recorded in every row
    backend: str = "reference"           # reference | (vllm, openai, replay: see llm/)
    suite_path: str | None = None
    temperature: float = 0.0
    max_tokens: int = 4096
    path: str = ""                       # weights (HF id or local dir) / the model name a server knows
    options: dict[str, Any] = field(default_factory=dict)  # typed by the backend's options=


@dataclass
class MethodConfig(Optioned):
    KIND, KEY, ENTRY = "method", "method", "kind"  # kind, else name
    LIFTED = {"branches": 1, "exemplars": 0, "cot": False}  # now the method's options (Optioned)
    MOVED = {"branches": "set method.options.branches (the options of parallel, agentic, "
                         "best_of_n)",
             **{k: f"set method.options.{k} (every method's options)"
                for k in ("exemplars", "cot")}}
    name: str = "one_shot"               # label recorded in every row (a preset's name)
    kind: str = ""                       # methods/base.py:REGISTRY key; "": same as name
    rounds: int = 0                      # refinement rounds after round 0 (repair, parallel, agentic)
    feedback: list[str] = field(default_factory=lambda: ["compile", "correctness", "performance"])
    stop_when: StopWhen = StopWhen.correct
    fast_speedup: float = 1.0            # `fast` = correct and speedup >= this
    templates_dir: str | None = None     # *.txt here override conf/prompts/*.txt by name
    options: dict[str, Any] = field(default_factory=dict)  # typed by the method's options=


@dataclass
class SweepConfig:
    name: str = "default"
    methods: list[str] = field(default_factory=list)   # conf/method names; empty: the `method`
    models: list[str] = field(default_factory=list)    # conf/model names; empty: the `model`
    samples: int = 1
    rounds: list[int] = field(default_factory=list)    # method.rounds values; empty: the method's
    hardware: list[str] = field(default_factory=list)  # pools; empty: top-level `hardware`


@dataclass
class EngineConfig:
    """How the sweep runs, not what its rows say: every field but `mode=noop` may change on a
    resume (RUN)."""
    max_concurrency: int = exempt(0, why=RUN)        # cells in flight in the driver; 0: from the
    #                                                  evaluators and vllm replicas
    #                                                  (scaling.concurrency), at least 64
    max_evaluators: int = exempt(16, why=RUN)        # per pool, on a cluster with kbx-role labels:
    #                                                  evaluators asked of the autoscaler while its
    #                                                  nodes are not up yet
    mode: EngineMode = verdict(EngineMode.actor,
                               as_=lambda m: m == "noop")  # actor (warm evaluators) | task
    #                                                  (fresh process per candidate) | noop
    #                                                  (instant made-up verdicts: engine overhead
    #                                                  benchmark; only noop is another sweep)
    retries: int = exempt(2, why=RUN)                # re-tries of a candidate whose evaluator died
    pool_wait_s: float = exempt(0.0, why=RUN)        # wait this long for the autoscaler to bring
    #                                                  up a pool
    actor_ready_s: float = exempt(300.0, why=RUN)    # evaluators not up by then are dropped
    #                                                  (none: an error)
    wal_fsync: bool = exempt(False, why=RUN)         # fsync each logged generation (survive power
    #                                                  loss too)
    evaluators: int = exempt(0, why=RUN)             # evaluator actors per pool; 0: one per GPU
    #                                                  (CPU: 1)
    evaluators_per_gpu: int = exempt(1, why=RUN)     # evaluators sharing each GPU: they compile
    #                                                  and check in parallel; timing holds the GPU
    #                                                  alone (evaluate/parent/gpulock.py)
    eval_batch: int = exempt(0, why=RUN)             # candidates per evaluator call; 0: 1
    #                                                  (bench_engine passes 64: with mode=noop the
    #                                                  round trip is the cost)
    flush_every: int = exempt(32, why=RUN)           # cells per Parquet part
    flush_s: float = exempt(10.0, why=RUN)           # ... or seconds, whichever comes first
    flush_min_s: float = exempt(1.0, why=RUN)        # ... but parts at least this far apart
    ray_address: str | None = exempt(None, why=RUN)  # None: start or join a local Ray
    aot_compile: AotCompile = exempt(AotCompile.off, why=RUN)  # off | on | always: compile
    #                                                  candidates'
    #                                                  Triton kernels ahead of time on CPU nodes
    #                                                  (`compile` resource) for each GPU pool's
    #                                                  sm_XX; `on`: while a compile worker is free,
    #                                                  used if ready when an evaluator takes it
    compile_workers: int = exempt(2, why=RUN)        # CPU compile actors (engine.aot_compile)
    compile_timeout_s: float = exempt(300.0, why=RUN)  # per candidate and architecture; then the
    #                                                  GPU compiles
    compile_resource: str = exempt("", why=RUN)      # custom resource compile actors ask for; "":
    #                                                  `compile` if the cluster has it now or
    #                                                  carries kbx-role labels (cluster.yaml: the
    #                                                  autoscaler starts compile nodes), else any
    #                                                  CPU


@dataclass
class Config:
    """Each field marks whether it is part of the sweep's identity (kbx_ray/identity.py)."""
    MOVED = {"wandb": "set sink.wandb.<key> (e.g. sink.wandb.mode=disabled)"}  # key -> its new place
    suite: SuiteConfig = walk(SuiteConfig)
    model: ModelConfig = verdict(factory=ModelConfig, as_=ModelConfig.hashed)  # the model and how
    #                                                                           it decodes
    method: MethodConfig = verdict(factory=MethodConfig, as_=MethodConfig.hashed)
    sweep: SweepConfig = verdict(factory=SweepConfig)      # the grid's axes
    hardware: list[str] = verdict(["auto"])  # pool names; auto: local
    evaluation: EvalConfig = walk(EvalConfig)
    engine: EngineConfig = walk(EngineConfig)
    sink: dict[str, Any] = exempt({}, why="each sink's own options: where rows go")  # sink.<name>
    #                                      .<key>=...: typed by the options dataclass that sink
    #                                      registered (sinks/__init__.py:sink_options)
    sinks: list[str] = exempt(["wandb", "console"], why="where rows go after Parquet")  # in
    #                                      order, after Parquet (always first: the record): sinks/
    output_dir: str = exempt("results", why="where the sweep folder is")
    sweep_id: str | None = exempt(None, why="names the folder: its identity.json is checked")
    overrides: list[str] = exempt([], why="the grid's variants, each in the identity, take them")
    #                                      (the command line's key=value items: the grid's method
    #                                      and model variants take their keys too)
    force_resume: bool = exempt(False, why="lets a run resume a folder recorded otherwise")
    #                                      true: resume into sweep_id's folder although its
    #                                      identity.json differs (verdicts of both settings mix)


def _group_file(group: str, name: str) -> Path:
    path = CONF_DIR / group / f"{name}.yaml"
    if not path.exists():
        choices = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        raise ConfigError(f"unknown {group} {name!r}: choose one of {', '.join(choices)} "
                          f"or add conf/{group}/{name}.yaml")
    return path


def _load_group(group: str, name: str, seen: tuple[str, ...] = ()) -> DictConfig:
    """A group file with `base: <name>` resolved: that file of the same group first, this file's
    keys over it. Variants are declared as a few keys, not copied (lm-eval-harness's `include:`)."""
    if name in seen:
        raise ConfigError(f"conf/{group}/{name}.yaml: `base:` loops back "
                          f"({' -> '.join((*seen, name))}); remove one of the base keys")
    node = OmegaConf.load(_group_file(group, name))
    base = node.pop("base", None) if isinstance(node, DictConfig) else None
    setup = node.pop("setup", None) if isinstance(node, DictConfig) else None
    if setup:  # not a model setting (it would change every cell id): kept beside the config
        _SETUP[str(node.get("name", name))] = str(setup)
    if base is None:
        return node
    return _merge(_load_group(group, str(base), (*seen, name)), node, f"conf/{group}/{name}.yaml")


def _merge(base: DictConfig, other: Any, where: str, schema: type | None = None,
           prefix: str = "") -> DictConfig:
    """`other` over `base`; `schema` (default `Config`, at `prefix` of it) types both: its choice
    fields take the booleans YAML makes of on/off, and any error is one line (kbx_ray/schema.py)."""
    schema = schema or Config
    spell_booleans(other, schema)
    try:
        return OmegaConf.merge(base, other)
    except OmegaConfBaseException as e:
        raise explain(e, schema, where, prefix) from None


def load_config(overrides: list[str] | None = None) -> Config:
    """conf/config.yaml, then group picks, then key=value overrides; validated against `Config`."""
    cfg = OmegaConf.structured(Config)
    cfg = _merge(cfg, OmegaConf.load(CONF_DIR / "config.yaml"), "conf/config.yaml")
    groups, dotlist = {}, []
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. model=reference)")
        key, value = item.split("=", 1)
        if key in GROUPS:
            groups[key] = value
        elif key == "hardware" and not value.startswith("["):
            dotlist.append(f"hardware=[{value}]")
        else:
            dotlist.append(item)
    for group in GROUPS:
        name = groups.get(group)
        if name is not None:
            node = OmegaConf.create({group: _load_group(group, name)})
            cfg = _merge(cfg, node, f"conf/{group}/{name}.yaml")
    try:
        cli = OmegaConf.from_dotlist(dotlist)
    except OmegaConfBaseException as e:
        raise ConfigError(f"cannot parse overrides: {str(e).splitlines()[0]}") from None
    cfg = _merge(cfg, cli, "the command line")
    if cfg.sweep.hardware and "hardware" not in cli:  # the sweep file's pools, unless overridden
        cfg.hardware = cfg.sweep.hardware
    _refuse_ignored(cfg, groups, cli)
    cfg.overrides = list(overrides or [])
    if not 1 <= cfg.engine.evaluators_per_gpu <= 16:
        raise ConfigError(f"engine.evaluators_per_gpu={cfg.engine.evaluators_per_gpu}: choose 1-16 "
                          "(evaluators sharing one GPU; timing takes it alone)")
    try:
        out: Config = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except ValueError as e:  # a dataclass's own check (e.g. TimingConfig.feed)
        raise ConfigError(f"bad setting: {str(e).splitlines()[0]}") from None
    return out


def _refuse_ignored(cfg: DictConfig, groups: dict[str, str], cli: DictConfig) -> None:
    """A pick or key that the sweep's axes would override is refused, not dropped in silence."""
    for group, axis in (("model", "models"), ("method", "methods")):
        names = list(cfg.sweep[axis])
        if group in groups and names:
            raise ConfigError(f"{group}={groups[group]} has no effect: the sweep's {axis} axis is "
                              f"[{', '.join(names)}]; set sweep.{axis}=[{groups[group]}] instead")
        if names and len(names) > 1 and "name" in (cli.get(group) or {}):
            raise ConfigError(f"{group}.name cannot label every variant of sweep.{axis} "
                              f"[{', '.join(names)}]: drop {group}.name")
    if cfg.sweep.rounds and "rounds" in (cli.get("method") or {}):
        raise ConfigError(f"method.rounds={cli.method.rounds} conflicts with the sweep's rounds "
                          f"axis {list(cfg.sweep.rounds)}: set sweep.rounds=[{cli.method.rounds}] "
                          "instead")


def setup_hint(model_name: str, path: str) -> str:
    """The command that builds a preset's local weights folder, if its preset names one."""
    hint = _SETUP.get(model_name, "")
    return hint.replace("{path}", path)


_YAML_HEAD = """\
# Every setting and its default, as the schema (kbx_ray/config.py) defines them; a test fails when
# they drift apart. Regenerate after changing a default:
#   python -c "from kbx_ray.config import default_yaml as d; print(d(), end='')" >conf/config.yaml
# Presets (conf/<group>/<name>.yaml) and the command line override these keys:
#   python scripts/sweep.py model=reference suite.include=[math] evaluation.seeds=5
# The default sweep: every task of the suite, model=reference (the project's own solutions),
# one_shot, on the local hardware (GPU if present, else the Triton interpreter on CPU). Rows go to
# Parquet (always first: the record), then to `sinks` in order (kbx_ray/sinks/).
"""


def choice_keys() -> list[tuple[str, type[Enum], str]]:
    """(key, its Enum, its default) of every choice-valued key, in the schema's order (the help
    text lists them), each registered sink's options' (`sink.<name>.<key>`) after them."""
    from kbx_ray.sinks import option_types

    defaults = OmegaConf.structured(Config)
    out = [(k, e, str(OmegaConf.select(defaults, k))) for k, e in choice_fields(Config)]
    for name, schema in option_types().items():
        node = OmegaConf.structured(schema)
        out += [(f"sink.{name}.{k}", e, str(OmegaConf.select(node, k)))
                for k, e in choice_fields(schema)]
    return out


def default_yaml() -> str:
    """conf/config.yaml's text: every field of `Config` at its default, and under `sink` each
    registered sink's options at theirs."""
    from kbx_ray.sinks import option_defaults

    node = OmegaConf.structured(Config)
    node.sink = option_defaults()
    return _YAML_HEAD + OmegaConf.to_yaml(node)


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore
