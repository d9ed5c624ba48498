"""agentic: generator -> evaluator -> reflector -> optimizer, C candidates per round (GEAK style).
More: kbx_ray/methods/README.md, `agentic.py`.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from kbx_ray.config.structured import MethodConfig
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, BranchOptions, Evaluate, Generate, Method, cached, finish, first_prompt, options_of,
    select_best, step, stop_reason,
)
from kbx_ray.prompting.prompts import Templates, agent_prompt
from kbx_ray.registry import register
from kbx_ray.types import Task


@dataclass
class AgenticOptions(BranchOptions):
    branches: int = 4           # candidates per round


@register("method", "agentic", runs_rounds=True, options=AgenticOptions)
def agentic(cfg: MethodConfig) -> Method:
    templates, opts = Templates(cfg.templates_dir), options_of(cfg, AgenticOptions)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        ev, first = cached(evaluate), first_prompt(task, opts, templates, pool=pool)
        attempts: list[Attempt] = []
        prompt, parent, reason = first, "", ""
        for rnd in range(cfg.rounds + 1):
            batch = await asyncio.gather(*(step(task, generate, ev, prompt, rnd, c, parent)
                                           for c in range(opts.branches)))
            attempts += batch
            best = select_best(attempts)
            reason = stop_reason(best.result, cfg)
            if reason:
                break
            prompt = agent_prompt(first, best, list(batch), rnd + 1, cfg.feedback, templates)
            parent = best.candidate.candidate_id
        n = len(attempts) - opts.branches  # the last round's attempts end every branch
        attempts[n:] = [replace(a, stop_reason=reason or "max_rounds") for a in attempts[n:]]
        return finish(attempts)

    return solve
