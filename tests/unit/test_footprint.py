"""kbx_ray.cases.footprint: a case's memory (distinct input storages + outputs), sized without
allocating, for the GPU memory admission (evaluate/parent/admission.py) and the unseen cases' bound
(unseen.py).
"""
from __future__ import annotations

import random
import textwrap

import pytest

from kbx_ray import unseen
from kbx_ray.cases import footprint
from kbx_ray.evaluate.parent.admission import CACHE_SETS, REPLAY_SETS, Admission
from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger, estimate_bytes
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.builtin import get_task
from kbx_ray.suites.task_import import load_module

# tasks whose draw or reference reads drawn values: fake mode cannot size them (module docstring)
FALLBACK = ("fusion/paged_attention_decode", "fusion/rope_interleaved",
            "fusion/varlen_causal_attention", "index/masked_select")

TABLE_TASK = '''
"""Rows of a large table: only `idx`'s rows are read."""
import torch

CATEGORY = "Index"
LEVEL = 1
CASES = [{"name": "a", "small": True, "rows": 100000, "d": 64, "n": 3}]


def gather_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return table[idx]


def make_inputs(case, seed, device):
    g = torch.Generator(device).manual_seed(seed)
    table = torch.randn(case["rows"], case["d"], generator=g, device=device)
    idx = torch.randint(0, case["rows"], (case["n"],), generator=g, device=device)
    return (table, idx), {}


def cost(case):
    return {"flops": 0, "bytes": 2 * case["n"] * case["d"] * 4 + 8 * case["n"]}
'''


def _task_module(tmp_path, name: str, text: str):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "task.py").write_text(textwrap.dedent(text))
    return load_module(folder / "task.py")


def test_an_unread_table_counts_whole(tmp_path):
    """The traffic reads 3 rows; the case allocates the whole 25.6 MB table."""
    mod = _task_module(tmp_path, "gather_rows", TABLE_TASK)
    case = mod.CASES[0]
    n, how = footprint.measure(mod, case)
    table, idx, out = 100000 * 64 * 4, 3 * 8, 3 * 64 * 4
    assert (n, how) == (table + idx + out, "fake")
    assert n > 1000 * mod.cost(case)["bytes"]
    assert footprint.size(mod, case) == n  # cached: the same again
    # the admission reserves by it: the estimate is the footprint's, not the traffic's
    cfg = EvalConfig(device="cpu")
    est = Admission(cfg, MemoryLedger("fp", 1 << 40, str(tmp_path))).estimate(mod, [case])
    # the replay process's sets and the parent's kept inputs and outputs too
    sets = cfg.timing_sets + cfg.fresh_sets + REPLAY_SETS + CACHE_SETS
    # two flush buffers; the three processes' contexts stand apart (gpu_ctx_mb)
    assert est == estimate_bytes(n, 2 * (cfg.timing.flush_mb << 20), cfg.gpu_mem_factor + sets)


def test_a_real_task_with_an_unread_part_is_larger_than_its_cost():
    """trace reads the diagonal of a matrix that is allocated whole."""
    task = get_task("linear_algebra/trace")
    mod = load_module(task.path)
    larger = 0
    for case in task.cases:
        n, how = footprint.sized(mod, case)
        assert how == "fake" and n >= mod.cost(case)["bytes"], case["name"]
        larger += n > 2 * mod.cost(case)["bytes"]
    assert larger >= len(task.cases) // 2  # a 1x1 matrix is all diagonal


def test_a_declared_footprint_is_taken(tmp_path):
    mod = _task_module(tmp_path, "gather_rows", TABLE_TASK + "\n\ndef footprint(case):\n    return 7\n")
    assert footprint.measure(mod, mod.CASES[0]) == (7, "declared")


def test_a_task_that_cannot_be_sized_falls_back_to_its_cost():
    """No reference, no make_inputs (a bare cost model): FALLBACK_FACTOR x cost bytes."""
    import types

    mod = types.SimpleNamespace(cost=lambda case: {"bytes": 1000})
    assert footprint.measure(mod, {"name": "x"}) == (footprint.FALLBACK_FACTOR * 1000, "fallback")


@pytest.mark.parametrize("task_id", FALLBACK)
def test_data_dependent_draws_fall_back_to_a_sound_bound(task_id):
    """Fake mode cannot size these (random lengths, a random start, one random hit): the bound is
    FALLBACK_FACTOR x cost bytes, and it covers real draws of every small case over many seeds."""
    task = get_task(task_id)
    mod = load_module(task.path)
    ref = getattr(mod, task.name)
    fell_back = 0
    for case in task.cases:
        n, how = footprint.measure(mod, case)
        if how != "fallback":
            continue
        fell_back += 1
        assert n == footprint.FALLBACK_FACTOR * mod.cost(case)["bytes"]
        if case["small"]:
            for seed in range(20):
                ins, outs = footprint.inputs_and_outputs(mod, case, "real", seed, ref, task.mutates)
                assert ins + outs <= n, (case["name"], seed, ins + outs, n)
    assert fell_back


def test_unseen_cases_are_bounded_by_footprint():
    """unseen.py grows a case within GPU_GROWTH x the largest public case's footprint (memory),
    not its traffic: index_fill's traffic skips most of its input."""
    task = get_task("index/index_fill")
    mod = load_module(task.path)
    here = list(task.cases)
    top = max(footprint.size(mod, c) for c in here)
    for seed in range(3):
        (case,) = unseen.cases(mod, task.cases, 1, random.Random(seed), False)
        assert footprint.size(mod, case) <= unseen.GPU_GROWTH * top
