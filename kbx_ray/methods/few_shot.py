"""few_shot: one_shot with k worked examples (conf/exemplars/, disjoint from the suite) first."""
from __future__ import annotations

from dataclasses import dataclass

from kbx_ray.config.structured import MethodConfig
from kbx_ray.methods.base import Method, PromptOptions
from kbx_ray.methods.one_shot import single_round
from kbx_ray.registry import register


@dataclass
class FewShotOptions(PromptOptions):
    exemplars: int = 2          # worked examples before the task (one_shot takes none)

    def __post_init__(self) -> None:
        if self.exemplars < 1:
            raise ValueError(f"exemplars={self.exemplars}: few_shot takes 1 or more "
                             "(method=one_shot takes none)")


@register("method", "few_shot", options=FewShotOptions)
def few_shot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg, FewShotOptions)
