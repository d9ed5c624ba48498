"""Task (+ hardware facts) -> chat messages.

The prompt states the task (its docstring), the PyTorch reference source, the exact signature and the
candidate contract the harness enforces. The task's own solution never appears here: a test walks the
suite and checks it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbx_ray.types import Task

SYSTEM = (
    "You are an expert GPU kernel engineer. You write correct, fast Triton kernels that replace "
    "PyTorch operators."
)

CONTRACT = """Write a complete Python module that defines `{signature}`.
Rules the harness enforces:
- All computation happens in `@triton.jit` kernels that your function launches. torch may only
  allocate (torch.empty, torch.zeros, ...), reshape and view tensors.
- Import only torch, triton, triton.language and math. No try/except fallbacks, no other modules,
  no monkeypatching, no side streams.
- Return new tensors (never views of the inputs); do not modify inputs unless the task says so.
- Outputs must match the reference's shape and dtype exactly.
Answer with one ```python code block containing the whole module."""


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]


def hardware_facts(pool: Any | None) -> str:
    if pool is None or not getattr(pool, "peak_gbps", 0):
        return ""
    tf = ", ".join(f"{k} {v:g}" for k, v in sorted(getattr(pool, "peak_tflops", {}).items()))
    return (f"\nTarget GPU: {pool.gpu} ({pool.sm_count} SMs, {pool.peak_gbps:g} GB/s memory "
            f"bandwidth, peak TFLOP/s: {tf}).")


def build_prompt(task: Task, pool: Any | None = None, extra: str = "") -> Prompt:
    user = (
        f"# Task: {task.task_id}\n\n{task.description}\n\n"
        f"## PyTorch reference\n```python\n{task.reference_source.rstrip()}\n```\n"
        f"{hardware_facts(pool)}\n\n{CONTRACT.format(signature=task.signature)}"
    )
    if extra:
        user += "\n\n" + extra
    return Prompt(messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
