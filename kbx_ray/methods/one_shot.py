"""one_shot: one prompt, one completion, one evaluation (AutoTriton, Claude, DeepSeek styles)."""
from __future__ import annotations

from dataclasses import replace

from kbx_ray.config import MethodConfig
from kbx_ray.hardware import HardwarePool
from kbx_ray.methods.base import Attempt, Evaluate, Generate, Method, finish, first_prompt, step
from kbx_ray.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.types import Task


def single_round(cfg: MethodConfig | None, exemplars: int | None = None, cot: bool | None = None) -> Method:
    """The shape one_shot, few_shot and cot share; they differ only in their first prompt."""
    templates = Templates(getattr(cfg, "templates_dir", None))

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        prompt = first_prompt(task, cfg, templates, exemplars=exemplars, cot=cot, pool=pool)
        a = await step(task, generate, evaluate, prompt, 0)
        return finish([replace(a, stop_reason="max_rounds")])

    return solve


@register("method", "one_shot")
def one_shot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg)
