"""The backend protocol and its registry: `async generate(messages, params) -> Generation`.

Backends register by name (kbx_ray/registry.py) and import their heavy dependency (vllm, the
openai SDK) inside their factory, so listing or checking backends imports neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kbx_ray.config.structured import ModelConfig
from kbx_ray.registry import MissingDependencyError, RegistryError, registry
from kbx_ray.types import Generation

Messages = list[dict[str, str]]


@dataclass
class GenParams:
    temperature: float | None = 0.0
    top_p: float | None = None                           # None: not sent (the model's default)
    max_tokens: int = 4096
    seed: int = 0                                        # per request: reproducible sampling
    meta: dict[str, Any] = field(default_factory=dict)   # task_id, sample, round, method


class Backend(Protocol):
    name: str

    async def generate(self, messages: Messages, params: GenParams) -> Generation: ...


# name -> Entry: each backend module registers itself with `@register("backend", name)`; the
# modules are imported only when a backend is looked up.
REGISTRY = registry("backend")


class UnknownBackendError(RegistryError):
    pass


def build_backend(cfg: ModelConfig) -> Backend:
    """Build the backend named by `cfg.backend` from its model config."""
    if cfg.backend not in REGISTRY:
        raise UnknownBackendError(f"unknown model backend {cfg.backend!r}: choose one of "
                                  f"{', '.join(REGISTRY)}")
    try:
        factory = REGISTRY.entry(cfg.backend).factory()
    except MissingDependencyError as e:
        from kbx_ray.llm.errors import BackendError

        raise BackendError(f"model {getattr(cfg, 'name', cfg.backend)}: {e}") from None
    return factory(cfg)


class Replayer(Protocol):
    """What a backend registered with `replays=True` offers: the grid covers the tasks and samples
    its source holds (grid.narrow_to_sources), and a dry run names the cells it cannot answer."""

    source: str          # where the completions come from, as messages name it
    skips_missing: bool  # an unanswered request is an empty completion, not an error

    def held_tasks(self) -> dict[str, int] | None: ...
    def unanswered(self, cells: Any) -> tuple[int, int, str]: ...
    def other_methods(self, method: str) -> list[str]: ...


def replicas_of(cfg: ModelConfig) -> Any | None:
    """The placement of the backend's replicas when its registration declares that it holds GPUs
    of the cluster (`gpus=`): replicas, gpus_per_replica, accelerator_type, resources, labels,
    max_inflight; None for a backend that holds none."""
    if cfg.backend not in REGISTRY:
        return None
    gpus = REGISTRY.entry(cfg.backend).gpus
    return gpus(cfg) if gpus is not None else None


def replays(cfg: ModelConfig) -> bool:
    """Whether the model's backend registered `replays=True`."""
    return cfg.backend in REGISTRY and REGISTRY.entry(cfg.backend).replays


def generation_gpus(cfg: ModelConfig, accelerator_type: str | None = None) -> int:
    """GPUs that a model config's replicas hold (0 for a backend that holds none); with
    `accelerator_type`, only if the replicas may land on GPUs of that type. On a single machine
    the engine leaves these to generation when it sizes its evaluator groups, or the replicas
    wait forever for GPUs the evaluators hold."""
    spec = replicas_of(cfg)
    if spec is None or (accelerator_type and spec.accelerator_type not in (None, accelerator_type)):
        return 0
    return spec.replicas * spec.gpus_per_replica
