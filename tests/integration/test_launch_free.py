"""Calls that owe no Triton launch (issue 27 items 1-2), against the real evaluator on the CPU.

An honest kernel may return without launching when every output is empty (an early return on
`numel() == 0`, or a zero grid, which Triton skips) or is a whole, exact copy of an input where
that is the answer (floor of an integer tensor is `x.clone()`). Neither computes anything, so
neither is "no Triton kernel was launched" nor "torch wrote the output". The same freedom must
not open a door: a launchless call whose output is not such a copy, or one on a data-movement
task, or a torch op that computes the copy, still fails.

The task here is written for the test (integer and empty cases, which no suite task has): a
floor over float32, int32 and int64 inputs, with empty tensors among the cases.
"""
from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task, task_from_file
from tests.conftest import FIXTURES, make_candidate

TASK = '''
"""Floor of a tensor of any real dtype (integers are their own floor); it may be empty."""
import torch

CATEGORY = "Math"
LEVEL = 1


def floor(x: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.floor(x)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 101], "dtype": "float32"},
    {"name": "int32_small", "small": True, "shape": [33, 65], "dtype": "int32"},
    {"name": "int64_small", "small": True, "shape": [4097], "dtype": "int64"},
    {"name": "empty_fp32_small", "small": True, "shape": [0], "dtype": "float32"},
    {"name": "empty_int32_small", "small": True, "shape": [0, 7], "dtype": "int32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator("cpu").manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    if dtype.is_floating_point:
        x = torch.randn(case["shape"], generator=g) * 20
    else:
        x = torch.randint(-1000, 1000, case["shape"], generator=g)
    return (x.to(dtype).to(device),), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    return {"flops": n, "bytes": 8 * n}
'''

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _floor(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.floor(tl.load(x_ptr + offs, mask=m)), mask=m)


def floor(x):
{body}
'''
LAUNCH = """    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _floor[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y"""


def _candidate(body: str) -> str:
    return KERNEL.format(body=textwrap.indent(textwrap.dedent(body), "    "))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    path = root / "math" / "floor"
    path.mkdir(parents=True)
    (path / "task.py").write_text(TASK)
    return task_from_file(path / "task.py", root)


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=30))
    yield e
    e.close()


def _judge(ev, task, code: str):
    return ev.evaluate(task, make_candidate(task.task_id, "floor", code))


@pytest.mark.parametrize("fixture", ["empty_early_return", "identity_integer_floor"])
def test_honest_launch_free_idioms_pass(ev, task, fixture):
    """The honest_llm fixtures, as written by models: an early return on an empty input, and
    `x.clone()` for integers (a zero grid on empty floats, which Triton skips)."""
    code = (FIXTURES / "honest_llm" / f"{fixture}.py").read_text()
    res = _judge(ev, task, code)
    assert res.exec_ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"
    assert not [f for f in res.flags if f.startswith("torch_compute")], res.flags


def test_a_zero_grid_on_empty_inputs_passes(ev, task):
    """Always launching: on an empty input the grid is (0,), Triton runs nothing, and the output
    (empty) holds no values that anything could have written."""
    body = LAUNCH.replace("    x = x.contiguous()", "    x = x.contiguous()\n    if not x.is_floating_point():\n        return x.clone()")
    res = _judge(ev, task, _candidate(body))
    assert res.exec_ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"


@pytest.mark.parametrize("copy", [
    "x.clone()", "torch.empty_like(x).copy_(x)", "x.flatten().clone().view_as(x)",
    "x.new_empty(x.shape).copy_(x)",
], ids=["clone", "copy_into_empty", "clone_of_a_flat_view", "copy_into_new_empty"])
def test_any_exact_copy_is_the_integer_identity(ev, task, copy):
    """Integers are their own floor: whichever exact whole copy of the input a model writes is
    the answer, with no launch owed."""
    body = LAUNCH.replace("    x = x.contiguous()", "    if not x.is_floating_point():\n"
                          f"        return {copy}\n    x = x.contiguous()")
    res = _judge(ev, task, _candidate(body))
    assert res.exec_ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"


@pytest.mark.parametrize("body,kind", [
    # launchless on floats: a copy of the input is not floor's answer there
    ("return x.clone()", "mismatch"),
    # torch computes the floor itself (default deny), launchless or not
    ("return torch.floor(x)", "disqualified"),
    ("y = x.clone()\ny.floor_()\nreturn y", "disqualified"),
    # a copy cast to another dtype is not a copy of the input: it computes (and mismatches)
    ("return x.to(torch.float64).to(x.dtype) if x.is_floating_point() else x.double()",
     "disqualified"),
], ids=["clone_of_floats", "torch_floor", "floor_in_place", "cast_roundtrip"])
def test_launchless_calls_that_are_not_identity_copies_fail(ev, task, body, kind):
    res = _judge(ev, task, _candidate(body))
    assert (res.exec_ok, res.error_kind) == (False, kind), f"{res.stage}: {res.error_msg}"


def test_an_identity_copy_on_a_data_movement_task_is_not_launch_free(ev):
    """On a data-movement task (permute_copy: zero flops) a torch copy of the input is the task
    itself, so it owes a launch like any other answer."""
    pc = get_task("index/permute_copy")
    pc = replace(pc, cases=tuple(c for c in pc.cases if c["small"])[:2])
    code = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
            "def _k(x_ptr):\n    pass\n\n\n"
            "def permute_copy(x, dims):\n    return x.permute(dims).contiguous()\n")
    res = ev.evaluate(pc, make_candidate(pc.task_id, "permute_copy", code))
    assert (res.exec_ok, res.error_kind) == (False, "disqualified"), res.error_msg
