"""What the worker sends back, made safe to record: the parent's secret values and the harness's
paths removed from every string (it reaches Parquet, W&B and a model's repair prompt)."""
from __future__ import annotations

import os
import re
from typing import Any

SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL|^AWS_|^WANDB_|^HF_", re.I)


def _secret_values() -> list[str]:
    """Values of the parent's secret-looking variables (long enough to be worth scrubbing)."""
    return sorted({v for k, v in os.environ.items() if SECRET.search(k) and len(v) >= 6},
                  key=len, reverse=True)


def redact(obj: Any, secrets: list[str] | None = None) -> Any:
    """`obj` with every secret value replaced, in every string it holds: what the worker sends
    back (error messages, its log) reaches Parquet and W&B, so it must never carry one."""
    secrets = _secret_values() if secrets is None else secrets
    if isinstance(obj, str):
        for v in secrets:
            obj = obj.replace(v, "[REDACTED]")
        return obj
    if isinstance(obj, dict):
        return {k: redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, secrets) for v in obj]
    return obj


_LIB_PATH = re.compile(r"(?:/[^\s\"':]+)?/(?:site|dist)-packages/")
_HARNESS_PATH = re.compile(r"(?:/[^\s\"':]+)?/kbx_ray/[^\s\"':,)]*")
_SANDBOX_PATH = re.compile(r"/[^\s\"':]*/kbx_sbx_[^/\s\"']+/")


def scrub_paths(msg: str) -> str:
    """A message that may reach a model, without the harness's paths: library files keep their
    package-relative name, harness files become `<harness>`, the worker's temp dir goes."""
    msg = _HARNESS_PATH.sub("<harness>", msg)
    msg = _LIB_PATH.sub("<lib>/", msg)
    return _SANDBOX_PATH.sub("", msg)
