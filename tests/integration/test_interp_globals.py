"""CPU mode applies Triton's compiler rule on the globals a kernel reads. The interpreter read any
global, so `LOG2E: tl.constexpr = ...` (an annotation, not a constexpr) passed on the CPU and failed
to compile on the H200 (tests/fixtures/honest/sigmoid_exp2_block_ptr.py, now fixed)."""
from __future__ import annotations

import pytest

from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

KERNEL = '''
import torch
import triton
import triton.language as tl
{globals}

@triton.jit
def _scale_helper(v):
    return v * 1.0


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = _scale_helper(tl.where(x > ZERO, x, ZERO))
    tl.store(y_ptr + offs, y, mask=m)


def relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y
'''


@pytest.mark.parametrize("globals_, ok", [
    ("ZERO = tl.constexpr(0.0)", True),        # a constexpr value: Triton compiles it
    ("ZERO: tl.constexpr = 0.0", False),      # an annotation: Triton refuses it
    ("ZERO = 0.0", False),                    # a plain float global: refused
])
def test_kernel_globals_follow_the_compilers_rule(cpu_evaluator, globals_, ok):
    task = get_task("activation/relu")
    code = KERNEL.format(globals=globals_)
    res = cpu_evaluator.evaluate(task, make_candidate(task.task_id, "relu", code))
    if ok:
        assert res.exec_ok, res.error_msg
    else:
        assert (res.exec_ok, res.error_kind) == (False, "runtime_error"), res.error_msg
        assert "Cannot access global variable ZERO" in res.error_msg
