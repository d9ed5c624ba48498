"""parallel: W independent repair chains at once, keeping the best (KernelAgent style, 3 x 5).

Worker w is branch w of the records; each refines only its own candidates, stops on its own
`stop_when`, and draws its own seed per round, so workers explore different kernels even from the
same first prompt. Running them concurrently puts every worker's request of a round in flight
together, which the vLLM backend batches.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kbx_ray.config.structured import MethodConfig
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, BranchOptions, Evaluate, Generate, Method, cached, finish, options_of,
)
from kbx_ray.methods.repair import run_chain
from kbx_ray.prompting.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.types import Task


@dataclass
class ParallelOptions(BranchOptions):
    branches: int = 3           # workers, each its own repair chain


@register("method", "parallel", runs_rounds=True, options=ParallelOptions)
def parallel(cfg: MethodConfig) -> Method:
    templates, opts = Templates(cfg.templates_dir), options_of(cfg, ParallelOptions)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        ev = cached(evaluate)
        chains = await asyncio.gather(*(run_chain(task, generate, ev, cfg, opts, templates, w, pool)
                                        for w in range(opts.branches)))
        return finish([a for chain in chains for a in chain])

    return solve
