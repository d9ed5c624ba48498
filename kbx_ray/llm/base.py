"""The backend protocol and its registry: `async generate(messages, params) -> Generation`.

Backends register by name (kbx_ray/registry.py) and import their heavy dependency (vllm, the
openai SDK) inside their factory, so listing or checking backends imports neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kbx_ray.config import ModelConfig
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
