"""The `mutants` backend: sample k of a task is answered with the k-th mutant of its solution.

A sweep with `backend: mutants` runs them through the ordinary pipeline (past the last mutant the
answer holds no code: no_code_block).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from kbx_ray.config.structured import ModelConfig
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.mutation.mutants import Mutant, mutants_for
from kbx_ray.registry import register
from kbx_ray.types import Generation


class MutantsBackend:
    """Answers (task, sample k) with the k-th mutant of the task's solution."""

    name = "mutants"

    def __init__(self, solutions: dict[str, str], per_operator: int = 3) -> None:
        self.solutions = solutions  # task_id -> solution.py path
        self.per_operator = per_operator
        self.cache: dict[str, list[Mutant]] = {}

    def mutants(self, task_id: str) -> list[Mutant]:
        if task_id not in self.cache:
            path = self.solutions.get(task_id)
            source = open(path).read() if path else ""
            self.cache[task_id] = mutants_for(source, task_id, self.per_operator) if source else []
        return self.cache[task_id]

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        t0 = time.perf_counter()
        task_id, k = params.meta.get("task_id", ""), int(params.meta.get("sample", 0))
        found = self.mutants(task_id)
        if k < len(found):
            m = found[k]
            text = (f"Mutant {k} ({m.operator}, line {m.line}: {m.description}).\n\n"
                    f"```python\n{m.code}\n```\n")
        else:
            text = f"{task_id} has {len(found)} mutants; sample {k} has none."
        return Generation(text=text, latency_s=time.perf_counter() - t0, model=self.name)


@dataclass
class MutantsOptions:
    per_operator: int = 3  # mutated sites per operator


@register("backend", "mutants", options=MutantsOptions)
def build(cfg: ModelConfig) -> MutantsBackend:
    from kbx_ray.suites.builtin import load_suite

    options: MutantsOptions = cfg.typed_options()
    suite = load_suite(getattr(cfg, "suite_path", None) or None)
    return MutantsBackend({t.task_id: t.solution_path for t in suite if t.solution_path},
                          options.per_operator)
