"""one_shot: one prompt, one completion, one evaluation."""
from __future__ import annotations

from typing import Any

from kbx_ray.extract import extract
from kbx_ray.methods.base import Attempt, Evaluate, Generate, Method
from kbx_ray.prompts import build_prompt
from kbx_ray.types import Task


def one_shot(cfg: Any = None) -> Method:
    async def solve(task: Task, generate: Generate, evaluate: Evaluate) -> list[Attempt]:
        prompt = build_prompt(task)
        gen = await generate(prompt, 0)
        cand = extract(gen, task.task_id, task.name)
        return [Attempt(0, prompt, gen, cand, await evaluate(cand))]

    return solve
