"""agentic: generator -> evaluator -> reflector -> optimizer, C candidates per round (GEAK style).
More: kbx_ray/methods/README.md, `agentic.py`.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace

from kbx_ray.config import MethodConfig
from kbx_ray.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, Evaluate, Generate, Method, cached, finish, first_prompt, select_best, step,
    stop_reason,
)
from kbx_ray.prompts import Templates, agent_prompt
from kbx_ray.registry import register
from kbx_ray.types import Task


@register("method", "agentic", runs_rounds=True)
def agentic(cfg: MethodConfig) -> Method:
    templates = Templates(cfg.templates_dir)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        ev, first = cached(evaluate), first_prompt(task, cfg, templates, pool=pool)
        attempts: list[Attempt] = []
        prompt, parent, reason = first, "", ""
        for rnd in range(cfg.rounds + 1):
            batch = await asyncio.gather(*(step(task, generate, ev, prompt, rnd, c, parent)
                                           for c in range(cfg.branches)))
            attempts += batch
            best = select_best(attempts)
            reason = stop_reason(best.result, cfg)
            if reason:
                break
            prompt = agent_prompt(first, best, list(batch), rnd + 1, cfg.feedback, templates)
            parent = best.candidate.candidate_id
        n = len(attempts) - cfg.branches  # the last round's attempts end every branch
        attempts[n:] = [replace(a, stop_reason=reason or "max_rounds") for a in attempts[n:]]
        return finish(attempts)

    return solve
