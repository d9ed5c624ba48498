"""The `reference` backend: answers each task with the project's own Triton solution.

It is the oracle: a sweep with `model=reference` must come out all green on any hardware, which
validates the suite and the harness on a new GPU before any model is trusted.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.types import Generation


class ReferenceBackend:
    name = "reference"

    def __init__(self, solutions: dict[str, str]) -> None:
        self.solutions = solutions  # task_id -> solution.py path

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        t0 = time.perf_counter()
        task_id = params.meta.get("task_id", "")
        path = self.solutions.get(task_id)
        if not path:
            text = f"No reference solution exists for {task_id}."
        else:
            text = f"Here is the kernel.\n\n```python\n{Path(path).read_text()}```\n"
        return Generation(text=text, latency_s=time.perf_counter() - t0, model=self.name,
                          completion_tokens=0, finish_reason="stop")


def build(cfg: Any) -> ReferenceBackend:
    from kbx_ray.suite import load_suite

    suite = load_suite(getattr(cfg, "suite_path", None) or None)
    return ReferenceBackend({t.task_id: t.solution_path for t in suite if t.solution_path})
