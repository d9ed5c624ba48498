"""Unseen cases (issue 26 class 6, kbx_ray/unseen.py) against the real evaluator on the CPU.

A kernel specialised to the public shapes (one block covering the largest public case, a grid sized
for the public cases) passes every public case: with `evaluation.unseen_cases=0` it is judged
correct, with the default it fails on the case drawn for the evaluation, which the result records.
The replay is off here: this is the unseen layer alone (some of these fixtures the replay catches too).
"""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from kbx_ray import unseen
from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.records.rows import evaluation_row
from kbx_ray.sinks.parquet import rows_to_table
from kbx_ray.suites.builtin import get_task
from kbx_ray.suites.task_import import load_module
from tests.conftest import FIXTURES, make_candidate

EXPLOITS = FIXTURES / "exploits"


@pytest.fixture(scope="module")
def evs():
    on, off = (Evaluator(EvalConfig(device="cpu", case_timeout_s=120, load_timeout_s=60,
                                    unseen_cases=n, replay="off")) for n in (1, 0))
    yield on, off
    on.close()
    off.close()


@pytest.mark.parametrize("fixture,task_id", [
    ("d6_fixed_block_relu", "activation/relu"),
    ("d6_fixed_grid_matmul", "matrix_multiply/matmul"),
    ("e5_import_table_logspace", "random/logspace"),
    ("e5_odd_sizes_only_sum", "reduce/sum"),
])
def test_shape_specialised_kernels_pass_the_public_cases_only(evs, fixture, task_id):
    on, off = evs
    task = get_task(task_id)
    cand = make_candidate(task_id, task.name, (EXPLOITS / f"{fixture}.py").read_text())
    passed = off.evaluate(task, cand)  # the attack is real: every public case passes
    assert passed.exec_ok, passed.error_msg
    assert passed.unseen_cases == [] and len(passed.cases) == sum(c["small"] for c in task.cases)
    res = on.evaluate(task, cand)
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg
    assert "case unseen_0" in res.error_msg and res.cases[-1].case == "unseen_0"
    assert all(c.ok for c in res.cases[:-1])
    (drawn,) = res.unseen_cases
    assert drawn["name"] == "unseen_0" and drawn["small"] and drawn["unseen"] in {
        c["name"] for c in task.cases}


def test_the_unseen_case_is_checked_on_every_seed_recorded_and_never_timed(evs):
    on, _ = evs
    task = get_task("activation/relu")
    code = open(task.solution_path).read()
    res = on.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert res.exec_ok, res.error_msg
    (drawn,) = res.unseen_cases
    assert res.cases[-1].case == "unseen_0" and res.cases[-1].seeds == on.cfg.seeds
    assert not on._timed(drawn, list(task.cases) + [drawn])
    row = evaluation_row("s", SimpleNamespace(cell_id="c", method=SimpleNamespace(name="m"),
                                              model=SimpleNamespace(name="x"), sample=0),
                         task, SimpleNamespace(result=res, candidate=make_candidate(
                             task.task_id, task.name, code), round=0, branch=0,
                             parent_candidate_id="", stop_reason="", final=True,
                             generation=None), 0.0, "cpu")
    table = rows_to_table([row], "evaluations")
    assert json.loads(table.column("unseen_cases")[0].as_py()) == [drawn]
    again = on.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert again.unseen_cases != res.unseen_cases  # secret: drawn afresh per evaluation


def test_external_problems_and_ungrowable_pools_draw_none():
    shim = SimpleNamespace(ENTRY="f", CASES=[{"name": "a", "small": True, "n": 8}])
    assert unseen.family_of(shim).fixed
    relu = get_task("activation/relu")
    mod = load_module(relu.path)
    ones = [c for c in relu.cases if c["shape"] == [1]]
    assert unseen.cases(mod, ones, 1, random.Random(0), True) == []
    assert unseen.cases(mod, relu.cases, 0, random.Random(0), True) == []
