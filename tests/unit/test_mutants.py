"""The `mutants` backend: AST mutations of the solutions, served through the backend protocol."""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from kbx_ray.config.structured import ModelConfig
from kbx_ray.evaluate.static.checks import static_check
from kbx_ray.prompting.extract import extract
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.mutation import OPERATORS, mutants_for
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

SAMPLE = ["activation/relu", "reduce/sum", "matrix_multiply/matmul", "normalization/layer_norm",
          "optimizer/adam"]


def _source(task_id: str) -> str:
    return Path(get_task(task_id).solution_path).read_text()


def test_every_operator_fires_somewhere_in_the_suite():
    seen = {m.operator for t in SAMPLE for m in mutants_for(_source(t), t, per_operator=2)}
    assert seen == set(OPERATORS), set(OPERATORS) - seen


@pytest.mark.parametrize("task_id", SAMPLE)
def test_mutants_are_distinct_valid_and_deterministic(task_id):
    src = _source(task_id)
    ms = mutants_for(src, task_id, per_operator=2)
    assert ms and [m.code for m in ms] == [m.code for m in mutants_for(src, task_id, per_operator=2)]
    base = ast.unparse(ast.parse(src))
    assert len({m.code for m in ms}) == len(ms) and base not in {m.code for m in ms}
    assert [m.index for m in ms] == list(range(len(ms)))
    entry = get_task(task_id).name
    for m in ms:
        ast.parse(m.code)
        # one small change: the diff against the original touches few lines
        changed = [a for a, b in zip(base.splitlines(), m.code.splitlines()) if a != b]
        assert 0 < len(changed) <= 2 or len(base.splitlines()) != len(m.code.splitlines()), m
        # mutants are honest code: the static checks pass them, so values must kill them
        assert static_check(ast.parse(m.code), entry).violations == [], (m.operator, m.description)


def test_per_operator_caps_the_sites():
    src = _source("normalization/layer_norm")
    few, many = mutants_for(src, per_operator=1), mutants_for(src, per_operator=4)
    assert len(few) <= len(OPERATORS) < len(many)
    for op in OPERATORS:
        assert sum(m.operator == op for m in few) <= 1


def test_known_mutants_describe_what_changed():
    ms = mutants_for(_source("activation/relu"), "activation/relu", per_operator=5)
    descriptions = {(m.operator, m.description) for m in ms}
    assert any(op == "mask_removed" for op, _ in descriptions)
    assert ("off_by_one", "offs < n -> offs <= n") in descriptions
    assert any(op == "block_not_covering" and "drops the tail" in d for op, d in descriptions)


def test_backend_serves_the_kth_mutant_then_nothing():
    backend = build_backend(ModelConfig(name="m", backend="mutants", options={"per_operator": 1}))
    expected = mutants_for(_source("activation/relu"), "activation/relu", per_operator=1)

    def ask(k: int):
        gen = asyncio.run(backend.generate([], GenParams(meta={"task_id": "activation/relu",
                                                               "sample": k})))
        return extract(gen, "activation/relu", "relu")

    first = ask(0)
    assert not first.error_kind and first.code.strip() == expected[0].code.strip()
    assert ask(len(expected)).error_kind == "no_code_block"


@pytest.mark.slow  # starts a sandboxed CPU evaluator
def test_mutants_are_killed_by_the_evaluator(cpu_evaluator):
    """A missing mask, a dropped store and a grid that misses the tail all fail; the unmutated
    solution passes on the same evaluator."""
    task = get_task("activation/relu")
    ms = {m.operator: m for m in mutants_for(_source(task.task_id), task.task_id, per_operator=1)}
    for op in ("mask_removed", "dropped_store", "block_not_covering"):
        res = cpu_evaluator.evaluate(task, make_candidate(task.task_id, "relu", ms[op].code))
        assert not res.exec_ok and res.error_kind in ("mismatch", "runtime_error"), (op, res.error_msg)
    ok = cpu_evaluator.evaluate(task, make_candidate(task.task_id, "relu", _source(task.task_id)))
    assert ok.exec_ok, ok.error_msg
