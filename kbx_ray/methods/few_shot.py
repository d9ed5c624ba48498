"""few_shot: one_shot with k worked examples (conf/exemplars/, disjoint from the suite) first."""
from __future__ import annotations

from kbx_ray.config import MethodConfig
from kbx_ray.methods.base import Method
from kbx_ray.methods.one_shot import single_round
from kbx_ray.registry import register

DEFAULT_K = 2


@register("method", "few_shot")
def few_shot(cfg: MethodConfig | None = None) -> Method:
    return single_round(cfg, exemplars=getattr(cfg, "exemplars", 0) or DEFAULT_K)
