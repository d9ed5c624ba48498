"""Every task keeps the contract, and its own solution passes on every interpreter case.

This is the suite's gate: a new task lands only when this test is green for it. That includes the
task's shape family (kbx_ray/unseen.py): its unseen cases are new, odd, larger than the public ones
that run there, drawable and computable, and the solution passes one (in the same evaluation as
the public cases).
"""
from __future__ import annotations

import math
import random

import pytest
import torch

from kbx_ray import unseen
from kbx_ray.cases import footprint
from kbx_ray.prompting.prompts import build_prompt
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import CATEGORIES, stable_hash
from tests.conftest import make_candidate

TASKS = load_suite()
IDS = [t.task_id for t in TASKS]
# Tasks for which a shape family makes no sense (`SHAPES = family(fixed="why")`): keep it short.
NO_FAMILY: dict[str, str] = {}


def _flat(out):
    if out is None:
        return []
    return [out] if isinstance(out, torch.Tensor) else list(out)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_contract(task):
    mod = load_module(task.path)
    assert task.category in CATEGORIES and 1 <= task.level <= 5
    assert len(task.cases) >= 3, "at least 3 cases"
    assert any(c["small"] for c in task.cases), "at least one small (interpreter) case"
    assert any(not c["small"] for c in task.cases), "at least one large GPU case"
    assert len({c["name"] for c in task.cases}) == len(task.cases), "case names are unique"
    assert task.solution_path, "every task ships a solution.py"
    ref_params = __import__("inspect").signature(getattr(mod, task.name)).parameters
    for name in getattr(mod, "STRUCTURE", ()):  # structure inputs: tensor parameters of the reference
        assert name in ref_params, f"STRUCTURE names {name!r}, not a parameter of the reference"
        args, kwargs = mod.make_inputs(next(c for c in task.cases if c["small"]), 0, "cpu")
        bound = __import__("inspect").signature(getattr(mod, task.name)).bind(*args, **kwargs)
        assert isinstance(bound.arguments[name], torch.Tensor), f"STRUCTURE {name!r} is no tensor"
    for case in task.cases:
        cost = mod.cost(case)
        assert cost["flops"] >= 0 and cost["bytes"] > 0, case["name"]
        assert isinstance(cost["flops"], int) and isinstance(cost["bytes"], int), case["name"]


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_inputs_are_deterministic_and_outputs_not_degenerate(task):
    """Same seed -> same inputs; and no case's reference output is near-constant or near zero,
    so that returning zeros or a constant can never pass (the robust-kbench filter)."""
    mod = load_module(task.path)
    ref = getattr(mod, task.name)
    for case in [c for c in task.cases if c["small"]]:
        a, _ = mod.make_inputs(case, 0, "cpu")
        b, _ = mod.make_inputs(case, 0, "cpu")
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor):  # NaN-aware: NaN inputs are legitimate edge cases
                same = (x == y) | (x.isnan() & y.isnan()) if x.is_floating_point() else x == y
                assert x.shape == y.shape and bool(same.all()), case["name"]
        args, kwargs = mod.make_inputs(case, 0, "cpu")
        out = ref(*args, **kwargs)
        bound = __import__("inspect").signature(ref).bind(*args, **kwargs).arguments
        outs = _flat(out) + [bound[m] for m in task.mutates]
        assert outs, f"{case['name']}: the reference produced nothing to compare"
        for o in outs:
            if o.numel() < 2 or not o.is_floating_point():
                continue
            f = o.double()[torch.isfinite(o.double())]
            assert f.abs().max() > 1e-3, f"{case['name']}: output is near zero"
            if f.numel() > 16 and not task.random:
                assert f.std() > 1e-4 * (f.abs().mean() + 1e-12), f"{case['name']}: near-constant"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_solution_never_in_prompt(task):
    prompt = "\n".join(m["content"] for m in build_prompt(task).messages)
    solution = open(task.solution_path).read()
    kernels = [ln.strip() for ln in solution.splitlines() if ln.strip().startswith("def ")]
    assert solution.strip() not in prompt
    for line in kernels:
        if line.startswith(f"def {task.name}("):
            continue  # the entry signature is the contract, shown on purpose
        assert line not in prompt, f"solution line leaked into the prompt: {line}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_solution_passes_every_interpreter_case(task, cpu_evaluator, monkeypatch):
    """The public small cases and one unseen case, drawn from a seed fixed per task (the evaluator
    draws it secretly: here a failure must be reproducible)."""
    monkeypatch.setattr(cpu_evaluator, "_unseen_seed", lambda t: int(stable_hash(t.task_id), 16))
    code = open(task.solution_path).read()
    res = cpu_evaluator.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert res.exec_ok, f"{res.error_kind}: {res.error_msg} (unseen: {res.unseen_cases})"
    assert res.call_ok and res.stage == "done"
    drawn = 0 if task.task_id in NO_FAMILY else 1
    assert len(res.cases) == len([c for c in task.cases if c["small"]]) + drawn
    assert len(res.unseen_cases) == drawn and [c.case for c in res.cases[len(res.cases) - drawn:]] \
        == [c["name"] for c in res.unseen_cases]
    assert "no GPU" in res.timing_skipped


def _without(case: dict) -> dict:
    return {k: v for k, v in case.items() if k not in ("name", "small", "unseen")}


def _check_family(task, mod, small: bool, seed: int) -> dict:
    """One unseen case drawn as the evaluator does on the CPU (`small`) or a GPU, checked against
    the public cases that run there: only sizes, dtype/layout keys (to values the public cases
    give them) and a no-input task's declared arguments changed; sizes keep 0 and 1, the multiples
    and bounds the family asks for; one passes the public maximum; the footprint is bounded."""
    fam = unseen.family_of(mod)
    here = [c for c in task.cases if c["small"] or not small]
    (case,) = unseen.cases(mod, task.cases, 1, random.Random(seed), small)
    assert case["name"] == "unseen_0" and case["small"] == small
    assert all(_without(case) != _without(c) for c in task.cases), "an unseen case is public"
    (base,) = [c for c in here if c["name"] == case["unseen"]]  # the case it was drawn from
    new, old = unseen.positions(case, fam), unseen.positions(base, fam)
    free = set(fam.keys(base))
    vary = set(fam.vary if fam.vary is not None else unseen.LAYOUT_KEYS)
    drawn = set(fam.values(random.Random(seed), dict(base)) if callable(fam.values)
                else fam.values or ())
    assert new.keys() == old.keys() and {k: v for k, v in _without(case).items()
                                         if k not in free | vary | drawn} \
        == {k: v for k, v in _without(base).items() if k not in free | vary | drawn}, \
        "more than sizes, dtype, layout and declared arguments changed"
    for k in vary & (set(case) | set(base)):
        assert any(c.get(k) == case.get(k) for c in here), (k, case.get(k))
    for p, v in new.items():
        m = unseen.multiple_at(fam, base, p)
        most = unseen.unseen_draw._keyed(fam.most, p)
        assert (v == old[p] if old[p] < 2 else v >= 2 and v % m == 0), (p, old[p], v)
        assert most is None or v <= max(most, old[p]), (p, v, most)
    top = {}
    for c in here:
        for p, v in unseen.positions(c, fam).items():
            top[p] = max(top.get(p, v), v)
    assert any(v > top[p] for p, v in new.items()), "no size past the largest public one"
    size = lambda c: footprint.size(mod, c)  # noqa: E731 - the bound is on memory (unseen.py)
    growth = unseen.CPU_GROWTH if small else unseen.GPU_GROWTH
    assert size(case) <= growth * max(map(size, here))
    return case


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_unseen_cases_are_new_odd_larger_and_computable(task):
    """Several draws from fixed seeds, on the CPU (inputs and reference computed) and for a GPU
    (the bounds only: the cases are GPU-sized)."""
    mod = load_module(task.path)
    fam = unseen.family_of(mod)
    if fam.fixed or task.task_id in NO_FAMILY:
        assert fam.fixed and NO_FAMILY.get(task.task_id), "list it in NO_FAMILY with its reason"
        assert unseen.cases(mod, task.cases, 1, random.Random(0), True) == []
        return
    ref = getattr(mod, task.name)
    for seed in range(4):
        case = _check_family(task, mod, True, seed)
        args, kwargs = mod.make_inputs(case, seed, "cpu")
        ref(*args, **kwargs)
        _reference_takes(mod, ref, _check_family(task, mod, False, seed), seed)


def _reference_takes(mod, ref, case: dict, seed: int) -> None:
    """A GPU-sized draw is too large to compute here, but its shapes are checked: inputs and the
    reference under FakeTensorMode (shapes, no data) raise where the case breaks the task's own
    constraints (the H100 drew 641 channels for 32 groups before group_norm_silu declared them).
    Ops whose output shape depends on the data cannot run there and end the check early."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, \
        DynamicOutputShapeException, FakeTensorMode

    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            args, kwargs = mod.make_inputs(case, seed, "cpu")
            ref(*args, **kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException):
        pass
