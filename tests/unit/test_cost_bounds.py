"""No task's cost claims more traffic than its case can hold (tasks/README.md, `cost`).

The parent fails a timing as physically impossible when `cost(case)["min_bytes"]` (else `bytes`)
moved in the measured time beats the hardware's peak (parent/timing_judgement.py), so the figure
must never exceed the traffic an honest kernel cannot avoid. A necessary condition, checked here
for every case of every task and for unseen cases drawn from each family (CPU- and GPU-sized):
it is at most the storage of the distinct input tensors (each storage counted once) plus the
outputs (the returned tensors and the `MUTATES` arguments, written back).

Sizes come from cases/footprint.py (the GPU memory admission's measure): `make_inputs` and the
reference run under torch's FakeTensorMode (shapes and storages, no data), so the GPU-sized cases
cost milliseconds. An output whose size depends on the
data (masked_select) is counted at its largest (a ShapeEnv bounds it). Where drawing or the
reference reads drawn values (random lengths, a random start: paged_attention_decode,
rope_interleaved, varlen_causal_attention, masked_select's one-hit case), a small case is drawn
and run for real, and a GPU-sized one is left to the task's own review (a fake run would need
the values, a real one takes seconds to minutes on a CPU).
"""
from __future__ import annotations

import random

import pytest

from kbx_ray import unseen
from kbx_ray.cases.footprint import fake_sizes, inputs_and_outputs
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module

TASKS = load_suite()
IDS = [t.task_id for t in TASKS]


def _sizes(task, mod, case: dict) -> tuple[int, int] | None:
    """kbx_ray.cases.footprint's sizing under FakeTensorMode (a ShapeEnv where an output's size
    depends on the data: masked_select, nonzero); for real where drawing or the reference reads
    drawn values (random lengths, a random start, one hit), on a small case only (None for a GPU
    one: seconds to minutes here)."""
    ref = getattr(mod, task.name)
    sizes = fake_sizes(mod, case, ref, task.mutates)
    if sizes is None and case["small"]:
        return inputs_and_outputs(mod, case, "real", ref=ref, mutates=task.mutates)
    return sizes


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
