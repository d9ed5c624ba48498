"""The backend protocol and its registry: `async generate(messages, params) -> Generation`.

Backends register by name and import their heavy dependency (vllm, an HTTP client) inside their own
module, which is imported only when the backend is built.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbx_ray.types import Generation

Messages = list[dict[str, str]]


@dataclass
class GenParams:
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 4096
    seed: int = 0                                        # per request: reproducible sampling
    meta: dict[str, Any] = field(default_factory=dict)   # task_id, sample, round, method


class Backend(Protocol):
    name: str

    async def generate(self, messages: Messages, params: GenParams) -> Generation: ...


# name -> "module:factory"; the module is imported only when the backend is built.
REGISTRY: dict[str, str] = {
    "reference": "kbx_ray.llm.reference:build",
    "vllm": "kbx_ray.llm.vllm_actor:build",
    "openai": "kbx_ray.llm.openai_http:build",
    "replay": "kbx_ray.llm.replay:build",
    "mutants": "kbx_ray.llm.mutants:build",
}


class UnknownBackendError(ValueError):
    pass


def build_backend(cfg: Any) -> Backend:
    """Build the backend named by `cfg.backend` from its model config."""
    target = REGISTRY.get(cfg.backend)
    if target is None:
        raise UnknownBackendError(f"unknown model backend {cfg.backend!r}: choose one of "
                                  f"{', '.join(sorted(REGISTRY))}")
    module, _, factory = target.partition(":")
    return getattr(importlib.import_module(module), factory)(cfg)
