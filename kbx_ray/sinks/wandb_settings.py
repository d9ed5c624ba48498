"""The W&B sink's options (`sink.wandb.*`), the dataclass it registers.

A leaf: checking a config's sink options imports this and nothing of wandb, pandas or pyarrow.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kbx_ray.config.schema import Choice


class WandbMode(Choice):
    offline = "offline"      # `wandb sync` later
    online = "online"
    disabled = "disabled"



@dataclass
class WandbConfig:
    mode: WandbMode = WandbMode.offline
    project: str = "kbx_ray"
    entity: str | None = None        # None: the key's default entity
    group: str | None = None         # groups sweeps of one study in the UI
    dir: str | None = None           # None: the sweep's results dir, beside the Parquet
    table_log_interval_s: float = 30.0  # min seconds between table logs (each is an artifact)
    tags: list[str] = field(default_factory=list)  # added to the method, model, suite, pool tags
    artifacts: bool = True           # log the Parquet results and the report at the end
