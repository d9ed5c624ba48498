"""repair: R rounds of refinement, each seeing the previous candidate and the harness's verdict.

Round 0 is the first prompt; round r > 0 shows the model its round r-1 module and the feedback the
config asks for (compile errors, the mismatch summary, timing and SOL fraction). The chain stops
when `stop_when` is met (correct; fast = correct and speedup >= fast_speedup; never) or after
round R. The answer is the best candidate so far, so the state after any k <= R rounds is read off
the same records (kbx_ray/records/ablation.py).
"""
from __future__ import annotations

from dataclasses import replace

from kbx_ray.config.structured import MethodConfig
from kbx_ray.config.hardware import HardwarePool
from kbx_ray.methods.base import (
    Attempt, Evaluate, Generate, Method, PromptOptions, cached, finish, first_prompt, options_of,
    step, stop_reason,
)
from kbx_ray.prompting.prompts import Templates, repair_prompt
from kbx_ray.registry import register
from kbx_ray.types import Task


async def run_chain(task: Task, generate: Generate, evaluate: Evaluate, cfg: MethodConfig,
                    opts: PromptOptions, templates: Templates, branch: int = 0,
                    pool: HardwarePool | None = None) -> list[Attempt]:
    """One refinement chain; its last attempt carries why it stopped."""
    first = first_prompt(task, opts, templates, pool=pool)
    chain: list[Attempt] = []
    reason = ""
    for rnd in range(cfg.rounds + 1):
        prev = chain[-1] if chain else None
        prompt = repair_prompt(first, prev, cfg.feedback, templates) if prev else first
        a = await step(task, generate, evaluate, prompt, rnd, branch,
                       parent=prev.candidate.candidate_id if prev else "")
        chain.append(a)
        reason = stop_reason(a.result, cfg)
        if reason:
            break
    chain[-1] = replace(chain[-1], stop_reason=reason or "max_rounds")
    return chain


@register("method", "repair", runs_rounds=True, options=PromptOptions)
def repair(cfg: MethodConfig) -> Method:
    templates, opts = Templates(cfg.templates_dir), options_of(cfg, PromptOptions)

    async def solve(task: Task, generate: Generate, evaluate: Evaluate,
                    pool: HardwarePool | None = None) -> list[Attempt]:
        return finish(await run_chain(task, generate, cached(evaluate), cfg, opts, templates,
                                       pool=pool))

    return solve
