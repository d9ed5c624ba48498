"""Every case of every task draws its inputs on the GPU, deterministically, in well under a second."""
from __future__ import annotations

import time

import pytest

from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module

pytestmark = pytest.mark.gpu


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for x in obj for t in _tensors(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors(x)]
    return []


def _bits_equal(x, y) -> bool:
    """Equal including NaNs (several cases plant NaNs on purpose)."""
    import torch

    return x.shape == y.shape and x.dtype == y.dtype and bool(
        torch.equal(x.isnan(), y.isnan()) if x.is_floating_point() else True) and torch.equal(
        torch.nan_to_num(x) if x.is_floating_point() else x, torch.nan_to_num(y) if y.is_floating_point() else y)


def test_every_case_draws_on_the_gpu():
    import torch

    torch.zeros(1, device="cuda")  # CUDA init outside the clock
    slow, wrong, unequal = {}, [], []
    for task in load_suite():
        mod = load_module(task.path)
        for case in task.cases:
            key = f"{task.task_id}/{case['name']}"
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            a = _tensors(mod.make_inputs(case, 7, "cuda"))
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            b = _tensors(mod.make_inputs(case, 7, "cuda"))
            if any(t.device.type != "cuda" for t in a):
                wrong.append(key)
            if len(a) != len(b) or not all(_bits_equal(x, y) for x, y in zip(a, b)):
                unequal.append(key)
            if dt > 0.5:
                slow[key] = round(dt, 3)
            del a, b
        torch.cuda.empty_cache()
    assert wrong == [], f"inputs left on the CPU: {wrong}"
    assert unequal == [], f"same seed, different inputs: {unequal}"
    assert slow == {}, f"input draws slower than 0.5 s: {slow}"
