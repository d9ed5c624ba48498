"""A construct the Triton interpreter lacks leaves the CPU without a verdict: the record is filed
`unsupported_interpreter`, flagged `awaits_gpu`, says so in its message, and counts as no pass in
any metric, even for a wrong kernel hidden behind such a construct (a bfloat16 atomic)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.records.metrics import RunningMetrics, passed
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60))
    yield e
    e.close()


@pytest.mark.parametrize("fixture,task_id", [("e8_bf16_atomic_hides_leaky_relu", "activation/relu"),
                                             ("e8_bf16_atomic_sum_wrong_silu", "activation/silu")])
def test_a_wrong_kernel_behind_an_interpreter_gap_awaits_a_gpu_and_never_passes(ev, fixture,
                                                                               task_id):
    task = get_task(task_id)
    task = replace(task, cases=tuple(c for c in task.cases if c["small"])[:1])
    code = (FIXTURES / "exploits" / f"{fixture}.py").read_text()
    res = ev.evaluate(task, make_candidate(task.task_id, task.name, code))
    assert (res.exec_ok, res.error_kind) == (False, "unsupported_interpreter"), res.error_msg
    assert "awaits_gpu" in res.flags and res.error_msg.startswith("awaits a GPU verdict")
    assert "bfloat16" in res.error_msg
    row = {**res.to_dict(), "method": "m", "model": "x", "hardware": "cpu", "category": "c"}
    assert not passed(row) and not passed({**row, "exec_ok": True})
    metrics = RunningMetrics().update([row, {**row, "exec_ok": True}])
    assert metrics["metrics/overall/exec_rate"] == 0.0
    assert metrics["metrics/overall/awaits_gpu_rate"] == 1.0
