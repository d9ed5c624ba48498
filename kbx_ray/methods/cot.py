"""cot: one_shot with chain-of-thought instructions: reason about layout and edge cases, then code.

Extraction takes the last Python block, so the reasoning (and any <think> block) costs nothing but
tokens; a completion cut off mid-reasoning is recorded as `truncated`.
"""
from __future__ import annotations

from dataclasses import dataclass

from kbx_ray.config.structured import MethodConfig
from kbx_ray.methods.base import Method, PromptOptions
from kbx_ray.methods.one_shot import single_round
from kbx_ray.registry import register


@dataclass
class CotOptions(PromptOptions):
    cot: bool = True            # chain-of-thought instructions (false: one_shot's prompt)


@register("method", "cot", options=CotOptions)
def cot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg, CotOptions)
