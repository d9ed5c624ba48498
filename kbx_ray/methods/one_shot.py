"""one_shot: one prompt, one completion, one evaluation (AutoTriton, Claude, DeepSeek styles)."""
from __future__ import annotations

from dataclasses import replace

from kbx_ray.config.structured import MethodConfig
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, Evaluate, Generate, Method, PromptOptions, finish, first_prompt, options_of, step,
)
from kbx_ray.prompting.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.types import Task


def single_round(cfg: MethodConfig | None, schema: type[PromptOptions] = PromptOptions) -> Method:
    """The shape one_shot, few_shot and cot share; they differ only in their options' defaults
    (`schema`), so in their first prompt."""
    templates, opts = Templates(getattr(cfg, "templates_dir", None)), options_of(cfg, schema)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        prompt = first_prompt(task, opts, templates, pool=pool)
        a = await step(task, generate, evaluate, prompt, 0)
        return finish([replace(a, stop_reason="max_rounds")])

    return solve


@register("method", "one_shot", options=PromptOptions)
def one_shot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg)
