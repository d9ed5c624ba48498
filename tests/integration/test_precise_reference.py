"""Whose verdict is right when a half-precision reference and the candidate disagree (precise.py).

The task's reference rounds its running sum to float16 at every row, as a half-precision
reduction may; an honest kernel that sums in float32 and rounds once is closer to the true answer
and further than the tolerance from that reference. The float64 run of the same reference is the
second judge: the honest kernel passes and the record says the reference was imprecise; a kernel
that is wrong stays wrong.
"""
from __future__ import annotations

import pytest
import torch

from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.parent.precise import admitted, float64_outputs
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.builtin import task_from_file
from tests.conftest import make_candidate

TASK = '''"""Column sums of a float16 matrix: `colsum(x)` for x [R, C] returns [C]."""
import torch

CATEGORY = "Reduce"
LEVEL = 1
CASES = [{"name": "long_small", "small": True, "r": 2048, "c": 64}]


def colsum(x: torch.Tensor) -> torch.Tensor:
    """Reference: a running sum rounded to the input's dtype after every row."""
    acc = torch.zeros_like(x[0])
    for row in x:
        acc = acc + row
    return acc


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator(device).manual_seed(seed)
    return (torch.randn(case["r"], case["c"], generator=g, device=device).half(),), {}


def cost(case: dict) -> dict:
    return {"flops": case["r"] * case["c"], "bytes": 2 * case["c"] * (case["r"] + 1)}
'''

HONEST = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _colsum(x_ptr, out_ptr, R, C, SKIP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    for r0 in range(0, R - SKIP, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < R - SKIP) & (cols[None, :] < C)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=m, other=0.0).to(tl.float32), axis=0)
    tl.store(out_ptr + cols, acc.to(tl.float16), mask=cols < C)


def colsum(x):
    r, c = x.shape
    out = torch.empty(c, dtype=x.dtype, device=x.device)
    _colsum[(triton.cdiv(c, 32),)](x, out, r, c, SKIP=0, BLOCK_R=256, BLOCK_C=32)
    return out
'''


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    (root / "reduce" / "colsum").mkdir(parents=True)
    path = root / "reduce" / "colsum" / "task.py"
    path.write_text(TASK)
    return task_from_file(path, root)


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=120, load_timeout_s=60))
    yield e
    e.close()


def test_the_reference_really_is_further_than_the_tolerance_from_the_exact_sum():
    """The premise: on this case the float16 running sum misses the float64 sum by more than the
    float16 tolerance somewhere, and a float32 sum rounded once does not."""
    x = torch.randn(2048, 64, generator=torch.Generator().manual_seed(1)).half()
    running = torch.zeros(64, dtype=torch.float16)
    for row in x:
        running = running + row
    exact = x.double().sum(0)
    bound = 5e-3 + 5e-3 * exact.abs()
    assert bool(((running.double() - exact).abs() > bound).any())
    assert not bool(((x.float().sum(0).half().double() - exact).abs() > bound).any())


def test_an_honest_kernel_more_exact_than_the_reference_passes_and_the_record_says_so(ev, task):
    res = ev.evaluate(task, make_candidate(task.task_id, "colsum", HONEST))
    assert res.exec_ok, res.error_msg
    assert any(f.startswith("reference_imprecise:long_small") for f in res.flags), res.flags


def test_a_wrong_kernel_is_still_wrong(ev, task):
    """Dropping the last row is off by a whole value everywhere: neither answer admits it."""
    res = ev.evaluate(task, make_candidate(task.task_id, "colsum", HONEST.replace("SKIP=0", "SKIP=1")))
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg


def test_admitted_takes_only_values_close_to_the_exact_answer():
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float16)
    exact = [torch.tensor([1.0, 2.5, 3.0, 4.0], dtype=torch.float64)]
    out = torch.tensor([1.0, 2.5, 3.5, 4.0], dtype=torch.float16)
    (merged,), count = admitted([out], [ref], exact, None)
    assert count == 1  # index 1 is the exact answer; index 2 is neither's
    assert merged.tolist() == [1.0, 2.5, 3.0, 4.0]
    assert ref.tolist() == [1.0, 2.0, 3.0, 4.0]  # the reference's own tensor is not written


def test_no_second_opinion_where_the_reference_cannot_run_in_float64():
    def only_half(x):
        if x.dtype != torch.float16:
            raise TypeError("float16 only")
        return x * 2
    assert float64_outputs(only_half, (torch.ones(3, dtype=torch.float16),), {}, ()) is None
    merged, count = admitted([torch.ones(3)], [torch.zeros(3)], None, None)
    assert count == 0 and merged[0].tolist() == [0.0, 0.0, 0.0]
