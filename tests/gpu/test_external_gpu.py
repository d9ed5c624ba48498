"""The real KernelBench-X tree on a GPU: every listed entry builds (the CUDA-only ones that the CPU
skips included), and the peer candidates get their expected verdicts with timing on. Run on the
device machine:

    python -m pytest -m gpu tests/gpu/test_external_gpu.py -q
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kbx_ray.suites.builtin import load_suite
from tests.conftest import make_candidate

REPO = Path(__file__).resolve().parents[2]
EXTERNAL = Path(os.environ.get("KBX_EXTERNAL") or REPO / ".." / "shared" / "external").resolve()
KBX = EXTERNAL / "KernelBenchX" / "data"
PEERS = REPO / "scripts" / "bench" / "peers" / "kernelbenchx"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(not (KBX / "kernelbenchx_v1.json").is_file(),
                       reason=f"the KernelBench-X tree is not at {EXTERNAL} (set KBX_EXTERNAL)"),
]


@pytest.fixture(scope="module", autouse=True)
def shim_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KBX_SUITE_CACHE", str(tmp_path_factory.mktemp("gpu_suite_cache")))
        yield


def test_every_listed_entry_builds_on_the_gpu():
    skipped: dict[str, str] = {}
    tasks = load_suite(KBX, None, "kernelbenchx", skipped)
    assert len(tasks) == 176 and not skipped, skipped
    ids = {t.task_id for t in tasks}
    assert {"LinearAlgebra/lu", "LinearAlgebra/invert_matrix_lu", "Random/rand"} <= ids


@pytest.mark.parametrize("name,exec_ok,kind", [
    ("relu__correct.py", True, ""), ("logit__correct.py", True, ""),
    ("relu__scaled.py", False, "mismatch"), ("relu__torch.py", False, "disqualified"),
    ("relu__clobbers_input.py", False, "mismatch"),
])
def test_peer_candidates_on_the_gpu(name, exec_ok, kind):
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator

    code = (PEERS / name).read_text()
    task_id = code.split("task: ")[1].split()[0]
    (task,) = load_suite(KBX, [task_id], "kernelbenchx")
    ev = Evaluator(EvalConfig(device="cuda"))
    try:
        res = ev.evaluate(task, make_candidate(task_id, task.name, code))
    finally:
        ev.close()
    assert (res.exec_ok, res.error_kind) == (exec_ok, kind), res.error_msg
    if exec_ok:
        assert res.speedup and res.timing_skipped == ""


@pytest.mark.parametrize("name,exec_ok,kind", [
    ("19_ReLU__correct.py", True, ""), ("19_ReLU__scaled.py", False, "mismatch"),
    ("19_ReLU__torch.py", False, "disqualified"),
])
def test_kernelbench_candidates_at_its_tolerance(name, exec_ok, kind):
    """KernelBench's fp32 tolerance is 1e-4: a ReLU scaled by 1.005 fails, as it does there."""
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator

    root = EXTERNAL / "KernelBench" / "KernelBench"
    code = (PEERS.parent / "kernelbench" / name).read_text()
    (task,) = load_suite(root, ["level1/19_ReLU"], "kernelbench")
    ev = Evaluator(EvalConfig(device="cuda"))
    try:
        res = ev.evaluate(task, make_candidate(task.task_id, task.name, code))
    finally:
        ev.close()
    assert (res.exec_ok, res.error_kind) == (exec_ok, kind), res.error_msg
