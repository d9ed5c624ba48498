"""The replay process's failures that are never the candidate's: running out of memory beside other
evaluators (seen on an H100 at 8 jobs: filed as the candidate's runtime_error, failing honest
kernels) and the task's own input draw failing. Both are infra_error, with the OOM marker that
makes the evaluator retry alone (admission.is_oom)."""
from __future__ import annotations

import types

import pytest
import torch

from kbx_ray.evaluate.common.inputs import InputCache
from kbx_ray.evaluate.parent.admission import is_oom
from kbx_ray.evaluate.worker import replay_ops
from kbx_ray.evaluate.worker.candidate_errors import CandidateError


@pytest.mark.parametrize("exc", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 256.00 MiB"),
    RuntimeError("Triton Error [CUDA]: out of memory"),
])
def test_an_out_of_memory_in_the_replay_is_infra_and_retried_alone(exc):
    with pytest.raises(CandidateError) as got:
        with replay_ops._errors():
            raise exc
    assert got.value.kind == "infra_error"
    assert is_oom(got.value.msg) and "not the candidate's fault" in got.value.msg


def test_a_kernel_that_fails_on_fresh_inputs_is_still_the_candidates():
    with pytest.raises(CandidateError) as got:
        with replay_ops._errors():
            raise IndexError("index 7 is out of bounds")
    assert got.value.kind == "runtime_error" and not is_oom(got.value.msg)


@pytest.mark.parametrize("exc, oom", [(torch.OutOfMemoryError("CUDA out of memory"), True),
                                      (ValueError("a task's own bug"), False)])
def test_the_fresh_input_draw_failing_is_infra(monkeypatch, tmp_path, exc, oom):
    kern = tmp_path / "k.py"
    kern.write_text("X = 1\n")

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(replay_ops, "replay_inputs", boom)
    w = types.SimpleNamespace(entry=None, replays={}, inputs=InputCache(), task=None, task_key="k",
                              _load_task=lambda req: None)
    req = {"kernels_path": str(kern), "module": "m", "program": {}, "case": {}, "seed": 1,
           "fresh_seed": 2, "entry": "f"}
    monkeypatch.setattr(replay_ops.program, "parse", lambda raw: object())
    with pytest.raises(CandidateError) as got:
        replay_ops._setup(w, req)
    assert got.value.kind == "infra_error" and "not the candidate's fault" in got.value.msg
    assert is_oom(got.value.msg) == oom


def test_a_long_out_of_memory_message_keeps_its_marker_when_trimmed():
    """An OOM's traceback is long: trimmed to its head and tail, the 'CUDA out of memory' line in
    the middle went, the evaluator saw no OOM, and an honest kernel's OOM beside 7 other jobs was
    filed as its own runtime_error (H100, 8 jobs)."""
    from kbx_ray.evaluate.parent.case_checks import Fail, file_failure
    from kbx_ray.types import EvalResult

    msg = ("Traceback (most recent call last):\n" + "  frame\n" * 40 + "torch.OutOfMemoryError: "
           "CUDA out of memory. Tried to allocate 256.00 MiB." + " Process 5 has 1 GiB." * 30
           + " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF")
    res = EvalResult(task_id="t", candidate_id="c")
    file_failure(res, Fail("correctness", "runtime_error", msg))
    assert is_oom(res.error_msg) and len(res.error_msg) < 700
    res = EvalResult(task_id="t", candidate_id="c")
    file_failure(res, Fail("correctness", "runtime_error", "x" * 2000))
    assert not is_oom(res.error_msg)
