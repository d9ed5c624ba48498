"""The method protocol (inspect_ai's solver pattern): configuration outside, a coroutine inside.

A method receives the task and two injected coroutines, `generate` and `evaluate`, and returns its
attempts, one per LLM call. A one-shot method and an N-round repair method have the same shape; the
engine neither knows nor cares how many rounds a method runs.
More: kbx_ray/methods/README.md, `base.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Protocol, TypeVar

from kbx_ray.config.structured import MethodConfig
from kbx_ray.errors import ConfigError
from kbx_ray.prompting.extract import extract
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.prompting.prompts import (
    Prompt, TemplateError, Templates, build_prompt, hardware_facts, pick_exemplars,
)
from kbx_ray.registry import RegistryError, registry
from kbx_ray.config.schema import bounded, typed
from kbx_ray.types import STAGES, Candidate, EvalResult, Generation, Task


@dataclass(frozen=True)
class Attempt:
    round: int                  # 0 = the first generation; r = the r-th refinement
    prompt: Prompt              # what the model was asked
    generation: Generation      # what it answered
    candidate: Candidate        # the code extracted from the answer
    result: EvalResult          # the harness's verdict on the candidate
    parent_candidate_id: str = ""  # the candidate this one was asked to improve
    final: bool = True          # the method's answer for this cell (exactly one per cell)
    branch: int = 0             # candidate index within a round (worker, agent candidate, sample)
    stop_reason: str = ""       # on each branch's last attempt: correct | fast | max_rounds


class Generate(Protocol):
    """(prompt, round, branch) -> generation; the engine seeds each (round, branch) distinctly."""

    def __call__(self, prompt: Prompt, round: int, branch: int = 0) -> Awaitable[Generation]: ...


Evaluate = Callable[[Candidate], Awaitable[EvalResult]]


class Method(Protocol):
    """`pool` is the cell's primary hardware pool: the GPU its prompts name (None: no GPU named)."""

    async def __call__(self, task: Task, generate: Generate, evaluate: Evaluate,
                       pool: HardwarePool | None = None) -> list[Attempt]: ...


@dataclass
class PromptOptions:
    """`method.options.*` that every method takes: what its first prompt holds (`first_prompt`)."""

    exemplars: int = bounded(0, low=0)  # worked examples (conf/exemplars/) before the task
    cot: bool = False           # chain-of-thought instructions (conf/prompts/cot.txt)


@dataclass
class BranchOptions(PromptOptions):
    """A method that runs several candidates per round adds how many."""

    branches: int = bounded(1, low=1)  # candidates per round (workers, agent candidates, samples)


O = TypeVar("O", bound=PromptOptions)


def options_of(cfg: MethodConfig | None, schema: type[O]) -> O:
    """`method.options` typed by a method factory's own options dataclass (a factory called
    directly, not by name, too); an unknown key or a bad value is one ConfigError line."""
    if cfg is None:
        return schema()
    return typed(schema, dict(cfg.options or {}), "method.options.", f"method {cfg.name}")


def branches(cfg: MethodConfig) -> int:
    """Candidates per round of the method (1 for a method that takes no `branches`)."""
    return getattr(cfg.typed_options(), "branches", 1)


# name -> Entry: each method module registers its factory with `@register("method", name)`.
REGISTRY = registry("method")


class UnknownMethodError(RegistryError):
    pass


def kind_of(cfg: MethodConfig) -> str:
    return cfg.kind or cfg.name


def check_method(cfg: MethodConfig) -> str | None:
    """One line naming a bad method setting and its fix, or None; run before anything starts (on
    each variant of the grid, and on a method made in code: the schema's types, choices and
    bounds again)."""
    kind = kind_of(cfg)
    if kind not in REGISTRY:
        return f"unknown method {kind!r}: choose one of {', '.join(REGISTRY)}"
    try:
        typed(MethodConfig, cfg, "method.", f"method {cfg.name}")
        cfg.typed_options()
        Templates(cfg.templates_dir)
    except (ConfigError, TemplateError) as e:
        return str(e)
    return None


def build_method(cfg: MethodConfig) -> Method:
    problem = check_method(cfg)
    if problem:
        raise UnknownMethodError(problem)
    return REGISTRY.build(kind_of(cfg), cfg)


# ---- shared steps ---------------------------------------------------------------------------
def rank(call_ok: Any, exec_ok: Any, speedup: Any, stage: Any) -> tuple[bool, float, bool, int]:
    """How good a result is: correct, then faster (timed only on GPUs), then callable, then how
    far it got. Works on EvalResults and on evaluation rows alike."""
    fast = float(speedup) if exec_ok and speedup is not None and math.isfinite(speedup) else 0.0
    return (bool(exec_ok), fast, bool(call_ok), STAGES.index(stage) if stage in STAGES else 0)


def result_rank(r: EvalResult) -> tuple[bool, float, bool, int]:
    return rank(r.call_ok, r.exec_ok, r.speedup, r.stage)


def select_best(attempts: list[Attempt]) -> Attempt:
    """The best attempt; among equals the earliest (round, then branch)."""
    return max(attempts, key=lambda a: (result_rank(a.result), -a.round, -a.branch))


def stop_reason(r: EvalResult, cfg: MethodConfig) -> str:
    """Why a chain stops after this result ("" = keep going). On a CPU speedup is None, so
    `fast` never stops early."""
    when = cfg.stop_when
    if when == "correct" and r.exec_ok:
        return "correct"
    if when == "fast" and r.exec_ok and r.speedup is not None and \
            r.speedup >= cfg.fast_speedup:
        return "fast"
    return ""


def finish(attempts: list[Attempt]) -> list[Attempt]:
    """Mark the best attempt final, and the rest not, keeping the order."""
    best = select_best(attempts)
    return [replace(a, final=a is best) for a in attempts]


def cached(evaluate: Evaluate) -> Evaluate:
    """Identical code is one candidate: evaluate it once per cell, however often it comes back."""
    seen: dict[str, EvalResult] = {}

    async def run(cand: Candidate) -> EvalResult:
        if cand.candidate_id not in seen:
            seen[cand.candidate_id] = await evaluate(cand)
        return seen[cand.candidate_id]

    return run


async def step(task: Task, generate: Generate, evaluate: Evaluate, prompt: Prompt, rnd: int,
               branch: int = 0, parent: str = "") -> Attempt:
    """One LLM call, its candidate and its verdict."""
    gen = await generate(prompt, rnd, branch)
    cand = extract(gen, task.task_id, task.name)
    return Attempt(rnd, prompt, gen, cand, await evaluate(cand), parent, final=False,
                   branch=branch)


def first_prompt(task: Task, opts: PromptOptions, templates: Templates,
                 pool: HardwarePool | None = None) -> Prompt:
    """Round 0's prompt: the task, the target GPU's facts (`pool`), plus the exemplars and
    chain-of-thought the method's options ask for."""
    k, think = opts.exemplars, opts.cot
    key = (task.task_id, task.task_hash, k, think, id(templates), hardware_facts(pool))
    if key not in _FIRST_PROMPTS:  # the same for every sample of a task: build it once
        if len(_FIRST_PROMPTS) > 4096:
            _FIRST_PROMPTS.clear()
        _FIRST_PROMPTS[key] = (templates, build_prompt(
            task, pool, exemplars=pick_exemplars(task, k) if k else (), cot=think,
            templates=templates))
    return _FIRST_PROMPTS[key][1]


_FIRST_PROMPTS: dict[tuple, tuple[Templates, Prompt]] = {}  # holds templates: ids stay unique
