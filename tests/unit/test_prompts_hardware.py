"""Prompts name the cell's GPU: its model, SM count, memory bandwidth and peak TFLOP/s per dtype.

The engine hands each method the cell's primary pool (engine._run_cell), every method builds its
first prompt for it, and a CPU pool (no peaks) leaves the prompt as it was.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kbx_ray.config import hardware
from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.records.genlog import GenerationLog
from kbx_ray.methods.base import build_method
from kbx_ray.prompting.prompts import build_prompt
from kbx_ray.suites.builtin import get_task
from kbx_ray.types import EvalResult, Generation

TASK = get_task("activation/relu")
H100 = hardware.get_pool("h100")
H100_FACTS = ("NVIDIA H100 80GB HBM3", "132 SMs", "3350 GB/s", "bfloat16 989.4", "float32 67")


def _user(messages: list[dict[str, str]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def test_prompt_for_an_h100_pool_names_the_gpu_and_its_peaks():
    text = _user(build_prompt(TASK, H100).messages)
    assert all(fact in text for fact in H100_FACTS), text
    assert text.count("Target GPU: NVIDIA H100") == 1  # once, in the task statement
    a100 = _user(build_prompt(TASK, hardware.get_pool("a100")).messages)
    assert "A100" in a100 and "H100" not in a100 and "3350 GB/s" not in a100


def test_a_cpu_pool_names_no_gpu():
    plain = build_prompt(TASK).messages
    assert build_prompt(TASK, hardware.get_pool("cpu")).messages == plain
    assert "Target GPU" not in _user(plain)


@pytest.mark.parametrize("method", ["one_shot", "few_shot", "cot", "repair", "parallel",
                                    "agentic", "best_of_n"])
def test_every_method_builds_its_prompts_for_the_pool_it_is_given(method):
    cfg = load_config([f"method={method}"]).method
    seen: list[str] = []

    async def generate(prompt: Any, rnd: int, branch: int = 0) -> Generation:
        seen.append(_user(prompt.messages))
        return Generation(text="no code")

    async def evaluate(cand: Any) -> EvalResult:
        return EvalResult(task_id=TASK.task_id, candidate_id=cand.candidate_id,
                          error_kind=cand.error_kind)

    for pool, named in ((H100, True), (None, False)):
        seen.clear()
        asyncio.run(build_method(cfg)(TASK, generate, evaluate, pool=pool))
        assert seen and all(("NVIDIA H100" in s) is named for s in seen), method


class _Evaluators:
    """The EvaluatorGroup's one method the cell loop calls, on a real CPU evaluator."""

    def __init__(self) -> None:
        self.ev = Evaluator(EvalConfig(device="cpu", seeds=1, case_timeout_s=60,
                                       load_timeout_s=120))

    async def evaluate(self, task: Any, cand: Any) -> EvalResult:
        return await asyncio.to_thread(self.ev.evaluate, task, cand)


class _Rows:
    def __init__(self) -> None:
        self.gen: list[dict] = []
        self.ev: list[dict] = []

    def add(self, cell_id: str, gen: list[dict], ev: list[dict]) -> None:
        self.gen += gen
        self.ev += ev


@pytest.mark.slow  # starts a sandboxed CPU evaluator
def test_engine_hands_the_cells_pool_to_the_method(tmp_path: Path):
    cfg = load_config([f"output_dir={tmp_path}", "suite.include=[activation/relu]", "model=reference",
                       "method=one_shot", "hardware=[h100]", "sink.wandb.mode=disabled"])
    p = engine.plan(cfg)
    cell = next(p.todo())
    group, rows = _Evaluators(), _Rows()
    try:
        asyncio.run(engine._run_cell(cell, p, engine._Built(), {"h100": group},
                                     GenerationLog(tmp_path), rows))
    finally:
        group.ev.close()
    prompt = _user(json.loads(rows.gen[0]["prompt"]))
    assert all(fact in prompt for fact in H100_FACTS), prompt
    assert rows.ev[0]["exec_ok"]  # the reference solution, judged for real
