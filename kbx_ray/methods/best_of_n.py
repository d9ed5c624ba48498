"""best_of_n: N independent samples of the first prompt (branches 0..N-1 of round 0), the best kept.

The baseline every iterative method has to beat at equal LLM calls: repair with R rounds costs
R + 1 calls, best_of_n with N = R + 1 costs the same.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from kbx_ray.config.structured import MethodConfig
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, BranchOptions, Evaluate, Generate, Method, cached, finish, first_prompt, options_of,
    step,
)
from kbx_ray.prompting.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.types import Task


@dataclass
class BestOfNOptions(BranchOptions):
    branches: int = 4           # samples of the first prompt


@register("method", "best_of_n", options=BestOfNOptions)
def best_of_n(cfg: MethodConfig) -> Method:
    templates, opts = Templates(cfg.templates_dir), options_of(cfg, BestOfNOptions)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        prompt, ev = first_prompt(task, opts, templates, pool=pool), cached(evaluate)
        samples = await asyncio.gather(*(step(task, generate, ev, prompt, 0, branch=i)
                                         for i in range(opts.branches)))
        return finish([replace(a, stop_reason="max_rounds") for a in samples])

    return solve
