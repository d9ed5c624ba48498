"""The config's schema: `Config` and one structured dataclass per section (suite, model, method,
sweep, engine), typed for OmegaConf; the evaluation's sections are evaluate/settings.py's.

Each field marks whether it is part of the sweep's identity (identity.py); loading, groups and
overrides are compose.py's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.config.identity import RUN, exempt, verdict, walk
from kbx_ray.config.schema import Choice, Optioned, bounded


class StopWhen(Choice):
    correct = "correct"      # stop at the first correct candidate
    fast = "fast"            # ... correct and speedup >= method.fast_speedup
    never = "never"          # every round runs


class Feedback(Choice):
    """What a refinement round's prompt tells of the last verdict (prompting/prompts.py)."""
    compile = "compile"          # why it failed to compile or run
    correctness = "correctness"  # which cases it got wrong
    performance = "performance"  # its timing, per case


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
    rounds: int = bounded(0, low=0)      # refinement rounds after round 0 (repair, parallel,
    #                                      agentic)
    feedback: list[Feedback] = field(default_factory=lambda: list(Feedback))  # detail shown
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
    rounds: list[int] = bounded([], low=0)             # method.rounds values; empty: the method's
    hardware: list[str] = field(default_factory=list)  # pools; empty: top-level `hardware`


@dataclass
class EngineConfig:
    """How the sweep runs, not what its rows say: every field but `mode=noop` may change on a
    resume (RUN)."""
    max_concurrency: int = bounded(exempt(0, why=RUN), low=0)
    #                                                  cells in flight in the driver; 0: from the
    #                                                  evaluators and vllm replicas
    #                                                  (scaling.concurrency), at least 64
    max_evaluators: int = bounded(exempt(16, why=RUN), low=1)
    #                                                  per pool, on a cluster with kbx-role labels:
    #                                                  evaluators asked of the autoscaler while its
    #                                                  nodes are not up yet
    mode: EngineMode = verdict(EngineMode.actor,
                               as_=lambda m: m == "noop")  # actor (warm evaluators) | task
    #                                                  (fresh process per candidate) | noop
    #                                                  (instant made-up verdicts: engine overhead
    #                                                  benchmark; only noop is another sweep)
    retries: int = bounded(exempt(2, why=RUN), low=0)  # re-tries of a candidate whose evaluator
    #                                                  died
    pool_wait_s: float = bounded(exempt(0.0, why=RUN), low=0)
    #                                                  wait this long for the autoscaler to bring
    #                                                  up a pool
    actor_ready_s: float = bounded(exempt(300.0, why=RUN), low=1)
    #                                                  evaluators not up by then are dropped
    #                                                  (none: an error)
    wal_fsync: bool = exempt(False, why=RUN)         # fsync each logged generation (survive power
    #                                                  loss too)
    evaluators: int = bounded(exempt(0, why=RUN), low=0)
    #                                                  evaluator actors per pool; 0: one per GPU
    #                                                  (CPU: 1)
    evaluators_per_gpu: int = bounded(exempt(1, why=RUN), 1, 16, why="evaluators sharing one "
                                      "GPU; timing takes it alone")
    #                                                  evaluators sharing each GPU: they compile
    #                                                  and check in parallel; timing holds the GPU
    #                                                  alone (evaluate/parent/gpulock.py)
    eval_batch: int = bounded(exempt(0, why=RUN), low=0)  # candidates per evaluator call; 0: 1
    #                                                  (bench_engine passes 64: with mode=noop the
    #                                                  round trip is the cost)
    flush_every: int = bounded(exempt(32, why=RUN), low=1)  # cells per Parquet part
    flush_s: float = bounded(exempt(10.0, why=RUN), low=0)  # ... or seconds, whichever comes first
    flush_min_s: float = bounded(exempt(1.0, why=RUN), low=0)
    #                                                  ... but parts at least this far apart
    ray_address: str | None = exempt(None, why=RUN)  # None: start or join a local Ray
    aot_compile: AotCompile = exempt(AotCompile.off, why=RUN)  # off | on | always: compile
    #                                                  candidates'
    #                                                  Triton kernels ahead of time on CPU nodes
    #                                                  (`compile` resource) for each GPU pool's
    #                                                  sm_XX; `on`: while a compile worker is free,
    #                                                  used if ready when an evaluator takes it
    compile_workers: int = bounded(exempt(2, why=RUN), low=1)
    #                                               CPU compile actors (engine.aot_compile)
    compile_timeout_s: float = bounded(exempt(300.0, why=RUN), low=1)
    #                                                  per candidate and architecture; then the
    #                                                  GPU compiles
    compile_resource: str = exempt("", why=RUN)      # custom resource compile actors ask for; "":
    #                                                  `compile` if the cluster has it now or
    #                                                  carries kbx-role labels (cluster.yaml: the
    #                                                  autoscaler starts compile nodes), else any
    #                                                  CPU


@dataclass
class Config:
    """Each field marks whether it is part of the sweep's identity (kbx_ray/config/identity.py)."""
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
