"""The replay runs beside the next seed's call (parent/correctness_stage.py): a seed's replay is
still judged before any later seed's outputs, and a reply nobody read never answers a later
request.

Real parts: the evaluator with its two sandbox workers on the CPU, the monitor and the static
layer off (as in test_replay_design), so only the replay tells the first seed's host answer.
"""
from __future__ import annotations

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.evaluate.parent.sandbox import Sandbox
from kbx_ray.evaluate.settings import SandboxConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

# A do-nothing launch, and a kernel that writes zeros: the candidates below share them.
KERNELS = '''
import torch
import triton
import triton.language as tl

CALLS = [0]


@triton.jit
def _noop(x_ptr, BLOCK: tl.constexpr):
    pass


@triton.jit
def _zeros(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(y_ptr.dtype.element_ty),
             mask=offs < n)


'''

# The first seed's two calls (the run and its repeat) answer with torch beside a do-nothing launch:
# right live, wrong in the replay. Every later call is wrong live (zeros from a kernel).
HOST_THEN_WRONG = KERNELS + '''
def relu(x: torch.Tensor) -> torch.Tensor:
    CALLS[0] += 1
    if CALLS[0] <= 2:
        _noop[(1,)](x, BLOCK=16)
        return x.clamp_min(0)
    y = torch.empty_like(x)
    _zeros[(triton.cdiv(x.numel(), 1024),)](y, x.numel(), BLOCK=1024)
    return y
'''


@pytest.fixture()
def unmonitored(static_off):
    ev = Evaluator(EvalConfig(device="cpu", monitor="off", case_timeout_s=60, load_timeout_s=60,
                              unseen_cases=0))
    yield ev
    ev.close()


def test_an_earlier_seeds_replay_is_the_verdict_though_a_later_seed_failed_live(unmonitored):
    task = get_task("activation/relu")
    res = unmonitored.evaluate(task, make_candidate(task.task_id, task.name, HOST_THEN_WRONG))
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg
    first = res.seeds[0]
    assert f"seed {first}: the replay of its kernel program" in res.error_msg, res.error_msg
    assert len(res.seeds) >= 2  # the second seed was drawn and ran beside the first one's replay
    assert res.stage_s["replay"] > 0


def test_a_request_whose_reply_was_never_read_does_not_answer_the_next():
    sbx = Sandbox(SandboxConfig())
    try:
        sbx.request({"op": "hello"}, 120)
        first = sbx.proc.pid
        sbx.send({"op": "probe"}, 60)  # its reply (value 12.0) is never read
        reply, _ = sbx.receive(sbx.send({"op": "hello"}, 120))
        assert "confinement" in reply and reply.get("value") != 12.0, reply
        assert sbx.proc.pid != first and sbx.inflight is None  # a fresh worker answered
        reply, _ = sbx.request({"op": "probe"}, 60)
        assert reply.get("value") == 12.0
    finally:
        sbx.kill()


# Right in every call of the first case but its last seed's, which answers with torch beside a
# do-nothing launch (right live, wrong in the replay); wrong live from the next case's first call.
LAST_SEED_HOST_THEN_WRONG = KERNELS + '''

@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


def relu(x: torch.Tensor) -> torch.Tensor:
    CALLS[0] += 1
    if CALLS[0] == 4:  # the first case's third seed (its first seed is called twice)
        _noop[(1,)](x, BLOCK=16)
        return x.clamp_min(0)
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    if CALLS[0] < 4:
        _relu[grid](x, y, x.numel(), BLOCK=1024)
    else:
        _zeros[grid](y, x.numel(), BLOCK=1024)
    return y
'''


def test_a_cases_last_replay_runs_beside_the_next_case_and_is_still_its_verdict(unmonitored):
    """The last seed's replay of a case is still in flight while the next case's first call runs;
    when it fails, the failure is that case's, though the next case's call failed live too."""
    task = get_task("activation/relu")
    res = unmonitored.evaluate(task, make_candidate(task.task_id, task.name,
                                                    LAST_SEED_HOST_THEN_WRONG))
    first_case = task.cases[0]["name"]
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg
    third = res.seeds[2]
    assert res.error_msg.startswith(f"case {first_case}: seed {third}: the replay of its kernel "
                                    "program"), res.error_msg
    assert len(res.seeds) > 3  # the next case's seeds were drawn: its call ran beside the replay
    assert [(c.case, c.ok) for c in res.cases] == [(first_case, False)]
