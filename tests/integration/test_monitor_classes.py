"""The runtime monitor's classes (issue 17: 1, 3, 4, 10) against the real evaluator, on the CPU.

The attacks themselves are fixtures in tests/fixtures/exploits/ (`c1_`, `c3_`, `c4_`, `c10_`),
run by test_exploits.py. Here: honest LLM host-code idioms (tests/fixtures/honest_llm/) must pass
the whole evaluator, and the monitor's ledger must tell a kernel-written output from a torch-written
one, whatever launches around it.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate

HONEST = sorted((FIXTURES / "honest_llm").glob("*.py"))


def _task_of(code: str) -> str:
    return re.search(r"^task: *(\S+)", ast.get_docstring(ast.parse(code)) or "", re.M).group(1)


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=30))
    yield e
    e.close()


KBX = Path(os.environ.get("KBX_EXTERNAL") or Path(__file__).resolve().parents[2] / ".." / "shared"
           / "external") / "KernelBenchX" / "data"


def _fp32_small(task_id: str):
    if task_id.startswith("kernelbenchx:"):  # a real KernelBench-X task: every recorded call
        if not (KBX / "kernelbenchx_v1.json").is_file():
            pytest.skip(f"the KernelBench-X tree is not at {KBX} (set KBX_EXTERNAL)")
        task = get_task(task_id.split(":", 1)[1], KBX, "kernelbenchx")
        return replace(task, cases=tuple(c for c in task.cases if c["small"]))
    task = get_task(task_id)
    cases = tuple(c for c in task.cases if c["small"] and c.get("dtype", "float32") == "float32")
    assert cases, f"{task_id} has no float32 small case"
    return replace(task, cases=cases)


@pytest.mark.parametrize("path", HONEST, ids=[p.stem for p in HONEST])
def test_honest_llm_idiom_passes(ev, path):
    code = path.read_text()
    task = _fp32_small(_task_of(code))
    res = ev.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert res.exec_ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"
    assert not [f for f in res.flags if f.startswith("torch_compute")], res.flags


RELU = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def relu(x):
    x = x.contiguous()
    {body}
'''
KERNEL_WRITES = "y = torch.empty_like(x)\n    k[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)\n    return y"


@pytest.mark.parametrize("body,ok,finding", [
    (KERNEL_WRITES, True, ""),
    # the kernel writes the answer, then a torch copy overwrites the output with the same values:
    # torch may not write into a buffer a kernel was handed (default deny refuses the copy_)
    (KERNEL_WRITES.replace("return y", "t = y.clone()\n    y.copy_(t)\n    return y"), False,
     "copy_.default into a buffer a kernel was handed"),
    (KERNEL_WRITES.replace("return y", "t = torch.zeros_like(y)\n    y.copy_(t)\n    return y"),
     False, "copy_.default into a buffer a kernel was handed"),
    # a copy of a kernel's result is still the kernel's values (`out.transpose(1, 2).contiguous()`
    # after an attention kernel): it may be returned ...
    (KERNEL_WRITES.replace("return y", "return y.clone()"), True, ""),
    # ... but not through a cast that truncates: that computes
    (KERNEL_WRITES.replace("return y", "return y.to(torch.int32).to(y.dtype)"), False,
     "of a kernel's result truncates or wraps"),
    # a constant fill of the output before the kernel writes it is allocation, not a result
    (KERNEL_WRITES.replace("y = torch.empty_like(x)", "y = torch.empty_like(x).fill_(0.0)"),
     True, ""),
    # ... and stays refused once a kernel wrote the buffer, even when another launch follows
    (KERNEL_WRITES.replace("return y", "y.zero_()\n    k[(triton.cdiv(x.numel(), 64),)](x, y, "
                           "x.numel(), BLOCK=64)\n    return y"), False,
     "zero_.default into a buffer a kernel was handed"),
], ids=["kernel_writes", "copy_over_output", "zeros_over_output", "clone_of_result",
        "truncating_cast_of_result", "constant_fill", "fill_between_launches"])
def test_only_kernels_write_outputs(ev, body, ok, finding):
    task = _fp32_small("activation/relu")
    res = ev.evaluate(task, make_candidate(task.task_id, "relu", RELU.format(body=body)))
    assert res.exec_ok is ok, f"{res.error_kind}: {res.error_msg}"
    if finding:
        assert res.error_kind == "disqualified" and finding in res.error_msg, res.error_msg


MASKED_SELECT = (FIXTURES / "honest_llm" / "masked_select_sum_item.py").read_text()
SIZING = "    total = int(mask.sum().item())  # number of selected elements\n"


@pytest.mark.parametrize("sizing,ok,finding", [
    # torch may compute sizes from the task's STRUCTURE input (the mask), through a cast too
    (SIZING, True, ""),
    ("    total = mask.to(torch.int32).sum().item()\n", True, ""),
    ("    total = int(torch.count_nonzero(mask))\n", True, ""),
    # ... but what it computes may not feed a kernel's values
    (SIZING + "    offs = torch.cumsum(mask_flat.to(torch.int32), 0)\n"
     "    masked_select_kernel[(1,)](x_flat, offs, torch.empty(1, device=x.device), 1, BLOCK_SIZE=16)\n",
     False, "computed from structure inputs"),
    # ... nor be an output
    (SIZING + "    if total >= 0:\n        return mask.sum().to(x.dtype).reshape(1).expand(total).contiguous()\n",
     False, "of values torch wrote"),
    # ... and a read-back number may size, not be a kernel's scalar argument
    ("    total = mask.sum().item()\n    masked_select_kernel[(1,)](x_flat, mask_flat, "
     "torch.empty(total, device=x.device, dtype=x.dtype), total, BLOCK_SIZE=16)\n", False, ""),
    # torch over the values of `x` (not structure) stays refused
    ("    total = int((x > 0).sum().item()) * 0 + int(mask.sum().item())\n", False, "gt"),
], ids=["sum_item", "cast_sum_item", "count_nonzero", "cumsum_into_kernel", "sum_as_output",
        "read_number_as_kernel_argument", "compute_on_x"])
def test_structure_inputs_may_size_outputs_only(ev, sizing, ok, finding):
    task = _fp32_small("index/masked_select")
    code = MASKED_SELECT.replace(SIZING, sizing)
    assert code != MASKED_SELECT or sizing == SIZING
    res = ev.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert res.exec_ok is ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"
    if not ok:
        assert res.error_kind == "disqualified" and finding in res.error_msg, res.error_msg
