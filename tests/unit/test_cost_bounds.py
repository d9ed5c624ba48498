"""No task's cost claims more traffic than its case can hold (tasks/README.md, `cost`).

The parent fails a timing as physically impossible when `cost(case)["min_bytes"]` (else `bytes`)
moved in the measured time beats the hardware's peak (parent/timing_judgement.py), so the figure
must never exceed the traffic an honest kernel cannot avoid. A necessary condition, checked here
for every case of every task and for unseen cases drawn from each family (CPU- and GPU-sized):
it is at most the storage of the distinct input tensors (each storage counted once) plus the
outputs (the returned tensors and the `MUTATES` arguments, written back).

Sizes come from `make_inputs` and the reference run under torch's FakeTensorMode (shapes and
storages, no data), so the GPU-sized cases cost milliseconds. An output whose size depends on the
data (masked_select) is counted at its largest (a ShapeEnv bounds it). Where drawing or the
reference reads drawn values (random lengths, a random start: paged_attention_decode,
rope_interleaved, varlen_causal_attention, masked_select's one-hit case), a small case is drawn
and run for real, and a GPU-sized one is left to the task's own review (a fake run would need
the values, a real one takes seconds to minutes on a CPU).
"""
from __future__ import annotations

import contextlib
import inspect
import random
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           FakeTensorMode)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

from kbx_ray import unseen
from kbx_ray.suite import load_module, load_suite

TASKS = load_suite()
IDS = [t.task_id for t in TASKS]
DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode)


def _tensors(obj: Any):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _int(n: Any, env: ShapeEnv | None) -> int:
    """A size; an unbacked one (a data-dependent output) at its upper bound."""
    if isinstance(n, torch.SymInt):
        node = n.node
        if env is not None and not node.has_hint():
            return int(env.bound_sympy(node.expr).upper)
        return int(node.require_hint())
    return int(n)


def _nbytes(t: torch.Tensor, env: ShapeEnv | None) -> int:
    n = 1
    for s in t.shape:
        n *= _int(s, env)
    return n * t.element_size()


def _inputs_and_outputs(task, mod, case: dict, mode: str) -> tuple[int, int]:
    """(bytes of the distinct input storages, bytes of the outputs) of one case, drawn under
    FakeTensorMode (`fake`), with a ShapeEnv bounding data-dependent output sizes (`shape_env`),
    or for real on the CPU (`real`)."""
    ref = getattr(mod, task.name)
    env = ShapeEnv() if mode == "shape_env" else None
    fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=env) if mode != "real" else None
    with fake or contextlib.nullcontext():
        args, kwargs = mod.make_inputs(case, 0, "cpu")
        storages = {}
        for x in _tensors((args, kwargs)):
            st = x.untyped_storage()
            storages[st._cdata] = _int(st.nbytes(), env)
        out = ref(*args, **kwargs)
        bound = inspect.signature(ref).bind(*args, **kwargs).arguments
        outs = sum(_nbytes(x, env) for x in _tensors(out))
        outs += sum(_nbytes(x, env) for m in task.mutates for x in _tensors(bound[m]))
    return sum(storages.values()), outs


def _sizes(task, mod, case: dict) -> tuple[int, int] | None:
    """`_inputs_and_outputs` under FakeTensorMode; with a ShapeEnv where an output's size depends
    on the data (masked_select, nonzero); for real where drawing or the reference reads drawn
    values (random lengths, a random start, one hit), on a small case only (None for a GPU one:
    seconds to minutes here)."""
    try:
        return _inputs_and_outputs(task, mod, case, "fake")
    except DynamicOutputShapeException:
        try:
            return _inputs_and_outputs(task, mod, case, "shape_env")
        except DATA_DEPENDENT:
            pass
    except DATA_DEPENDENT:
        pass
    return _inputs_and_outputs(task, mod, case, "real") if case["small"] else None


def _cases(task, mod) -> list[dict]:
    """The public cases and unseen ones drawn from the family (CPU- and GPU-sized, fixed seeds)."""
    out = list(task.cases)
    for small in (True, False):
        out += [dict(c, name=f"{c['name']}_{'cpu' if small else 'gpu'}")
                for c in unseen.cases(mod, task.cases, 1, random.Random(7), small)]
    return out


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_cost_within_inputs_and_outputs(task):
    mod = load_module(task.path)
    checked = 0
    for case in _cases(task, mod):
        cost = mod.cost(case)
        floor = cost.get("min_bytes", cost["bytes"])
        assert isinstance(floor, int) and 0 < floor <= cost["bytes"], (case["name"], cost)
        least = cost.get("min_flops", cost["flops"])
        assert isinstance(least, int) and 0 <= least <= cost["flops"], (case["name"], cost)
        assert set(cost) <= {"flops", "bytes", "min_flops", "min_bytes"}, (case["name"], cost)
        sizes = _sizes(task, mod, case)
        if sizes is None:
            continue
        ins, outs = sizes
        checked += 1
        assert floor <= ins + outs, (
            f"{case['name']}: cost {'min_bytes' if 'min_bytes' in cost else 'bytes'} {floor} > "
            f"{ins} bytes of distinct inputs + {outs} of outputs: an honest kernel moves less "
            "than the cost claims (tasks/README.md, cost)")
    assert checked >= len([c for c in task.cases if c["small"]])
