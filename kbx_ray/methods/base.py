"""The method protocol (inspect_ai's solver pattern): configuration outside, a coroutine inside.

A method receives the task and two injected coroutines, `generate` and `evaluate`, and returns its
attempts, one per LLM call. A one-shot method and an N-round repair method have the same shape; the
engine neither knows nor cares how many rounds a method runs.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from kbx_ray.prompts import Prompt
from kbx_ray.types import Candidate, EvalResult, Generation, Task


@dataclass(frozen=True)
class Attempt:
    round: int
    prompt: Prompt
    generation: Generation
    candidate: Candidate
    result: EvalResult
    parent_candidate_id: str = ""
    final: bool = True          # the method's answer for this cell


Generate = Callable[[Prompt, int], Awaitable[Generation]]   # (prompt, round) -> generation
Evaluate = Callable[[Candidate], Awaitable[EvalResult]]


class Method(Protocol):
    async def __call__(self, task: Task, generate: Generate, evaluate: Evaluate) -> list[Attempt]: ...


REGISTRY: dict[str, str] = {
    "one_shot": "kbx_ray.methods.one_shot:one_shot",
}


class UnknownMethodError(ValueError):
    pass


def build_method(cfg: Any) -> Method:
    target = REGISTRY.get(cfg.name)
    if target is None:
        raise UnknownMethodError(f"unknown method {cfg.name!r}: choose one of {', '.join(sorted(REGISTRY))}")
    module, _, factory = target.partition(":")
    return getattr(importlib.import_module(module), factory)(cfg)
