"""Structured configs (OmegaConf), `key=value` overrides, config groups, and sweep expansion.

Hydra is not used (hydra-core 1.3 pins omegaconf < 2.4), so this module does the little of it we
need: `group=name` picks conf/<group>/<name>.yaml, other `a.b=v` items override keys, and every
mistake becomes one `ConfigError` line that names the key and the fix. The grid (variants, cells)
is in grid.py; its names are importable from here too.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.sinks.wandb_config import WandbConfig
from kbx_ray.types import stable_hash

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("suite", "model", "method", "sweep")
_SETUP: dict[str, str] = {}  # model preset name -> the command that makes its local files


class ConfigError(ValueError):
    """A config problem the user can fix; the message is one line."""


@dataclass
class SuiteConfig:
    name: str = "kbx"                    # kbx (tasks/) | kernelbench | kernelbenchx (suites/)
    path: str | None = None              # suite root; default: the repo's tasks/
    include: list[str] = field(default_factory=list)  # ids, category folders or globs


@dataclass
class ModelConfig:
    name: str = "reference"              # label recorded in every row
    backend: str = "reference"           # reference | (vllm, openai, replay: see llm/)
    suite_path: str | None = None
    temperature: float = 0.0
    max_tokens: int = 4096
    path: str = ""                       # weights (HF id or local dir) / the model name a server knows
    base_url: str | None = None          # openai: http://host:port/v1
    api_key_env: str | None = None       # openai: environment variable holding the API key
    replicas: int = 1                    # vllm: engine replicas (Ray actors) behind one backend
    engine: dict[str, Any] = field(default_factory=dict)     # vllm: engine arguments (AsyncEngineArgs)
    placement: dict[str, Any] = field(default_factory=dict)  # vllm: accelerator_type, resources, labels
    options: dict[str, Any] = field(default_factory=dict)  # backend-specific


@dataclass
class MethodConfig:
    name: str = "one_shot"               # label recorded in every row (a preset's name)
    kind: str = ""                       # methods/base.py:REGISTRY key; "": same as name
    rounds: int = 0                      # refinement rounds after round 0 (repair, parallel, agentic)
    feedback: list[str] = field(default_factory=lambda: ["compile", "correctness", "performance"])
    stop_when: str = "correct"           # correct | fast | never
    fast_speedup: float = 1.0            # `fast` = correct and speedup >= this
    branches: int = 1                    # parallel workers / agentic candidates / best_of_n samples
    exemplars: int = 0                   # few-shot exemplars in the first prompt
    cot: bool = False                    # chain-of-thought instructions in the first prompt
    templates_dir: str | None = None     # *.txt here override conf/prompts/*.txt by name
    options: dict[str, Any] = field(default_factory=dict)


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
    max_concurrency: int = 0             # cells in flight in the driver; 0: from the evaluators
    #                                      and vllm replicas (scaling.concurrency), at least 64
    max_evaluators: int = 16             # per pool, on a cluster with kbx-role labels: evaluators
    #                                      asked of the autoscaler while its nodes are not up yet
    mode: str = "actor"                  # actor (warm evaluators) | task (fresh process per
    #                                      candidate) | noop (instant: engine overhead benchmark)
    retries: int = 2                     # re-tries of a candidate whose evaluator died
    pool_wait_s: float = 0.0             # wait this long for the autoscaler to bring up a pool
    actor_ready_s: float = 300.0         # evaluators not up by then are dropped (none: an error)
    wal_fsync: bool = False              # fsync each logged generation (survive power loss too)
    evaluators: int = 0                  # evaluator actors per pool; 0: one per GPU (CPU: 1)
    evaluators_per_gpu: int = 1          # evaluators sharing each GPU: they compile and check in
    #                                      parallel; timing holds the GPU alone (evaluate/gpulock.py)
    eval_batch: int = 0                  # candidates per evaluator call; 0: 1 (bench_engine
    #                                      passes 64: with mode=noop the round trip is the cost)
    flush_every: int = 32                # cells per Parquet part
    flush_s: float = 10.0                # ... or seconds, whichever comes first
    flush_min_s: float = 1.0             # ... but parts at least this far apart (fast cells)
    ray_address: str | None = None       # None: start or join a local Ray
    aot_compile: str = "off"             # off | on | always: compile candidates' Triton kernels
    #                                      ahead of time on CPU nodes (`compile` resource) for each
    #                                      GPU pool's sm_XX; `on`: while a compile worker is free,
    #                                      used if ready when an evaluator takes the candidate
    compile_workers: int = 2             # CPU compile actors (engine.aot_compile)
    compile_timeout_s: float = 300.0     # per candidate and architecture; then the GPU compiles
    compile_resource: str = ""           # custom resource compile actors ask for; "": `compile` if
    #                                      the cluster has it now or carries kbx-role labels
    #                                      (cluster.yaml: the autoscaler starts compile nodes), else
    #                                      any CPU


@dataclass
class Config:
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    hardware: list[str] = field(default_factory=lambda: ["auto"])  # pool names; auto: local
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    sinks: list[str] = field(default_factory=lambda: ["wandb", "console"])  # where rows go after
    #                                      Parquet (always first: the record), in order: sinks/
    output_dir: str = "results"
    sweep_id: str | None = None
    overrides: list[str] = field(default_factory=list)  # the command line's key=value items: the
    #                                      grid's method and model variants take their keys too


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


def _merge(base: DictConfig, other: Any, where: str) -> DictConfig:
    try:
        return OmegaConf.merge(base, other)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or ""
        raise ConfigError(f"bad config in {where}: {key + ': ' if key else ''}"
                          f"{str(e).splitlines()[0]}") from None


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
    aot = str(cfg.engine.aot_compile)  # YAML and the override grammar read on/off as booleans
    cfg.engine.aot_compile = {"True": "on", "False": "off", "true": "on", "false": "off"}.get(aot, aot)
    if cfg.engine.aot_compile not in ("off", "on", "always"):
        raise ConfigError(f"engine.aot_compile={cfg.engine.aot_compile!r}: choose off, on (compile "
                          "ahead while a compile worker is free) or always")
    try:
        out: Config = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except ValueError as e:  # a dataclass's own check (e.g. TimingConfig.feed)
        raise ConfigError(f"bad setting: {str(e).splitlines()[0]}") from None
    from kbx_ray.config_checks import check_choices

    check_choices(out)
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


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore


# evaluation settings that can change a verdict or a timing; the rest (timeouts, sandbox limits,
# caches) may change between a run and its resume
VERDICT_KEYS = ("device", "seeds", "large_seeds", "base_seed", "small_only", "torch_compute",
                "timing", "sol_limit", "timing_cases", "cpu_timing", "unseen_cases")


def sweep_id(cfg: Config) -> str:
    """Stable across re-runs of the same sweep; `suite.include` is left out so that adding tasks
    resumes into the same results folder. Settings that change what a cell's rows would say (the
    evaluation's verdict keys, `engine.mode=noop`'s made-up verdicts) make another sweep, so a
    re-run with them never skips cells that were judged otherwise."""
    if cfg.sweep_id:
        return cfg.sweep_id
    d = to_dict(cfg)
    key = {k: d[k] for k in ("model", "method", "sweep", "hardware")}
    key["suite"] = {k: v for k, v in d["suite"].items() if k != "include"}
    key["evaluation"] = {k: d["evaluation"][k] for k in VERDICT_KEYS}
    if cfg.engine.mode == "noop":
        key["noop"] = True
    # the grid's method and model presets as loaded (an edited conf/method/*.yaml would otherwise
    # add a second set of cells under the same names), and the prompt texts the methods render
    from kbx_ray.grid import methods, models

    variants = methods(cfg)
    key["variants"] = [OmegaConf.to_container(OmegaConf.structured(v))
                       for v in (*variants, *models(cfg))]
    key["prompts"] = _prompts_digest([v.templates_dir for v in variants])
    digest = stable_hash(key, n=8)
    legacy = f"{cfg.sweep.name}-{digest}"  # before readable names: such a folder still resumes
    if (Path(cfg.output_dir) / legacy).is_dir():
        return legacy
    return f"{readable_name(cfg)}-{digest}"


def readable_name(cfg: Config) -> str:
    """`<sweep or method>-<model>-<suite>`: what the results folder and the W&B run are called
    (the hash after it is the identity)."""
    def few(names: list[str], what: str) -> str:
        return "+".join(names) if len(names) <= 2 else f"{len(names)}{what}"

    head = cfg.sweep.name if cfg.sweep.name != "default" else \
        few(list(cfg.sweep.methods) or [cfg.method.name], "methods")
    model = few(list(cfg.sweep.models) or [cfg.model.name], "models")
    raw = f"{head}-{model}-{cfg.suite.name}"
    return "".join(ch if ch.isalnum() or ch in "._+-" else "_" for ch in raw)


def _prompts_digest(override_dirs: list[str | None]) -> str:
    """The text of every prompt template a sweep's methods can render."""
    h = hashlib.sha256()
    for d in [CONF_DIR / "prompts", *sorted({Path(o).expanduser() for o in override_dirs if o})]:
        for f in sorted(d.glob("*.txt")) if d.is_dir() else []:
            h.update(f"{f.name}\0".encode() + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


_GRID = ("Cell", "ROUND_KINDS", "count_cells", "grid_axes", "iter_cells", "methods", "models")


def __getattr__(name: str) -> Any:
    """The grid's names, from grid.py (imported on use: it imports this module)."""
    if name in _GRID:
        import kbx_ray.grid as grid

        return getattr(grid, name)
    raise AttributeError(f"module 'kbx_ray.config' has no attribute {name!r}")
