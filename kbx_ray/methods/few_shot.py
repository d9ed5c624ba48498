"""few_shot: one_shot with k worked examples (conf/exemplars/, disjoint from the suite) first."""
from __future__ import annotations

from dataclasses import dataclass

from kbx_ray.config.structured import MethodConfig
from kbx_ray.methods.base import Method, PromptOptions
from kbx_ray.methods.one_shot import single_round
from kbx_ray.config.schema import bounded
from kbx_ray.registry import register


@dataclass
class FewShotOptions(PromptOptions):
    exemplars: int = bounded(2, low=1, why="method=one_shot takes none")  # worked
    #                             examples before the task


@register("method", "few_shot", options=FewShotOptions)
def few_shot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg, FewShotOptions)
