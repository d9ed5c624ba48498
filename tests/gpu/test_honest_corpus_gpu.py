"""The honest corpus (tests/fixtures/honest/) on a real GPU (H200): every kernel is exec_ok with
timing on, the other half of "no false verdicts" (the CPU half, with unsupported_interpreter allowed,
is tests/integration/test_honest_corpus.py). Run on the device machine:

    python -m pytest -m gpu tests/gpu/test_honest_corpus_gpu.py -q
"""
from __future__ import annotations

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.config.hardware import detect_local, peak_for
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate
from tests.integration.test_honest_corpus import CORPUS

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_ev():
    pool = detect_local()
    ev = Evaluator(EvalConfig(
        device="cuda", case_timeout_s=60, load_timeout_s=120, peak_gbps=pool.peak_gbps,
        peak_tflops={k: peak_for(pool, k) for k in ("float32", "float16", "bfloat16")}))
    yield ev
    ev.close()


@pytest.mark.parametrize("h", CORPUS, ids=[h.name for h in CORPUS])
def test_honest_kernel_passes_on_the_gpu(gpu_ev, h):
    task = get_task(h.task_id)
    res = gpu_ev.evaluate(task, make_candidate(h.task_id, task.name, h.code))
    assert res.exec_ok, f"{res.stage}/{res.error_kind}: {res.error_msg}"
    assert res.cases and all(c.ok for c in res.cases)
    assert not res.timing_skipped, res.timing_skipped
