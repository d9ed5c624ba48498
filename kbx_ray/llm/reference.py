"""The `reference` backend: answers each task with the project's own Triton solution.

It is the oracle: a sweep with `model=reference` must come out all green on any hardware, which
validates the suite and the harness on a new GPU before any model is trusted.
"""
from __future__ import annotations

import time
from pathlib import Path

from kbx_ray.config.structured import ModelConfig
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.registry import register
from kbx_ray.types import Generation


class ReferenceBackend:
    name = "reference"

    def __init__(self, solutions: dict[str, str]) -> None:
        self.solutions = solutions  # task_id -> solution.py path
        self._texts: dict[str, str] = {}  # read once: every sample of a task gets the same answer

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        t0 = time.perf_counter()
        task_id = params.meta.get("task_id", "")
        path = self.solutions.get(task_id)
        if not path:
            text = f"No reference solution exists for {task_id}."
        else:
            if path not in self._texts:
                self._texts[path] = f"Here is the kernel.\n\n```python\n{Path(path).read_text()}```\n"
            text = self._texts[path]
        return Generation(text=text, latency_s=time.perf_counter() - t0, model=self.name,
                          completion_tokens=0, finish_reason="stop")


@register("backend", "reference")
def build(cfg: ModelConfig) -> ReferenceBackend:
    """Finds the solutions without importing every task (the sweep has loaded the ones it runs)."""
    from kbx_ray.suites.builtin import DEFAULT_ROOT

    root = Path(getattr(cfg, "suite_path", None) or DEFAULT_ROOT).resolve()
    return ReferenceBackend({p.parent.relative_to(root).as_posix(): str(p.resolve())
                             for p in sorted(root.glob("*/*/solution.py"))
                             if (p.parent / "task.py").exists()})
