"""Issue 17 classes 5, 6, 7, 11 and the parent's robustness, against the real evaluator and worker.

Secret seeds (the attack works against the old predictable ones), checked timed calls (on the CPU
with `cpu_timing`), layout, error classes without harness paths, a parent failure retried as
infra_error, the per-evaluation deadline, and outputs that are declared-mutated inputs.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent import case_checks as case_checks_mod  # the parent's comparison
from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.common.timing import TimingConfig
from kbx_ray.suites.builtin import get_task, task_from_file
from tests.conftest import FIXTURES, make_candidate

EXPLOITS = FIXTURES / "exploits"


def _one_case(task_id: str, name: str | None = None):
    task = get_task(task_id)
    cases = tuple(c for c in task.cases if c["small"] and (name is None or c["name"] == name))
    return replace(task, cases=cases[:1])


def _judge(ev: Evaluator, task, path: Path):
    return ev.evaluate(task, make_candidate(task.task_id, task.name, path.read_text()))


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60))
    yield e
    e.close()


@pytest.mark.parametrize("fixture,task_id,case", [
    ("c5_import_redraw_relu", "activation/relu", "fp32_small"),
    ("c5_import_precompute_matmul", "matrix_multiply/matmul", "square_small"),
])
def test_secret_seeds_make_import_time_answers_useless(ev, fixture, task_id, case):
    task = _one_case(task_id, case)
    res = _judge(ev, task, EXPLOITS / f"{fixture}.py")
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg
    assert len(res.seeds) >= 1 and all(s > 0 for s in res.seeds)
    old = Evaluator(EvalConfig(device="cpu", secret_seeds=False, case_timeout_s=60,
                               load_timeout_s=60, unseen_cases=0, replay="off"))  # public cases
    try:  # the attack is real: against base_seed + i, without the replay's fresh inputs, it passes
        passed = _judge(old, task, EXPLOITS / f"{fixture}.py")
    finally:
        old.close()
    assert passed.exec_ok, passed.error_msg
    assert passed.seeds == [0, 1, 2]


def test_seeds_are_fresh_per_evaluation_and_recorded(ev):
    task = _one_case("activation/relu", "size1")
    code = Path(task.solution_path).read_text()
    a, b = (ev.evaluate(task, make_candidate(task.task_id, "relu", code)) for _ in range(2))
    assert a.exec_ok and b.exec_ok
    assert len(a.seeds) == len(b.seeds) == 3 and len(set(a.seeds) | set(b.seeds)) == 6


@pytest.fixture(scope="module")
def timed_ev():
    e = Evaluator(EvalConfig(device="cpu", cpu_timing=True, case_timeout_s=120, load_timeout_s=60,
                             timing=TimingConfig(min_reps=80, max_reps=80, budget_s=0.0)))
    yield e
    e.close()


@pytest.mark.parametrize("fixture,task_id,kind,words", [
    ("c6_pointer_cache_clone_relu", "activation/relu", "mismatch", "timed calls checked"),
    ("c6_same_object_sigmoid", "activation/sigmoid", "disqualified", "returned before"),
    ("c6_launchless_cache_tanh", "activation/tanh", "disqualified", "launched no Triton kernel"),
    ("c6_content_cache_hash", "activation/relu", "timing_invalid", "never seen before"),
    ("c6f_deferred_miss_relu", "activation/relu", "mismatch", "differs from the reference"),
    ("c6f_settle_at_fresh_matmul", "matrix_multiply/matmul", "mismatch",
     "the same output as for an earlier input set although the inputs changed"),
    ("d9_count_switch_timed_torch", "matrix_multiply/matmul", "disqualified", "a timed call"),
])
def test_timed_calls_are_checked(timed_ev, fixture, task_id, kind, words):
    task = _one_case(task_id)
    res = _judge(timed_ev, task, EXPLOITS / f"{fixture}.py")
    assert (res.exec_ok, res.error_kind, res.stage) == (False, kind, "timing"), res.error_msg
    assert words in res.error_msg
    honest = _judge(timed_ev, task, Path(task.solution_path))
    assert honest.exec_ok, honest.error_msg
    assert honest.cases[0].cand_reps == 80


def test_honest_contiguous_result_on_a_transposed_input_passes(ev):
    """torch's relu keeps a transposed input's strides; a contiguous answer is still right."""
    task = _one_case("activation/relu", "transposed_small")
    res = _judge(ev, task, Path(task.solution_path))
    assert res.exec_ok, res.error_msg


@pytest.mark.parametrize("fixture,task_id", [("c11_conj_view_relu", "activation/relu"),
                                             ("c11_conj_view_sigmoid", "activation/sigmoid")])
def test_unreadable_outputs_are_the_candidates_error_without_harness_paths(fixture, task_id):
    """The encoder's rule on its own: default deny refuses `_conj` before the encoder is
    reached, so here it only records (`torch_compute=flag`)."""
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60,
                             torch_compute="flag"))
    try:
        res = _judge(e, _one_case(task_id), EXPLOITS / f"{fixture}.py")
    finally:
        e.close()
    assert (res.exec_ok, res.error_kind) == (False, "runtime_error"), res.error_msg
    assert "conjugate" in res.error_msg
    for path in ("kbx_ray/", "site-packages", "kbx_sbx_"):
        assert path not in res.error_msg


def test_a_triton_error_shows_no_harness_path(ev):
    task = _one_case("activation/relu")
    code = Path(task.solution_path).read_text().replace("BLOCK=", "NOT_A_PARAM=", 1)
    res = ev.evaluate(task, make_candidate(task.task_id, "relu", code))
    assert not res.exec_ok and res.error_kind in ("runtime_error", "import_error"), res.error_msg
    for path in ("kbx_ray/", "site-packages", "kbx_sbx_"):
        assert path not in res.error_msg


def test_a_parent_failure_is_infra_error_retried_once(ev, monkeypatch):
    import torch

    task = _one_case("activation/relu", "size1")
    code = Path(task.solution_path).read_text()
    real, calls = case_checks_mod.compare, []

    def oom_once(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated in the parent)")
        return real(*a, **k)

    monkeypatch.setattr(case_checks_mod, "compare", oom_once)
    res = ev.evaluate(task, make_candidate(task.task_id, "relu", code))
    assert res.exec_ok and "retried_infra_error" in res.flags, res.error_msg

    def always(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated in the parent)")

    monkeypatch.setattr(case_checks_mod, "compare", always)
    res = ev.evaluate(task, make_candidate(task.task_id, "relu", code))
    assert (res.exec_ok, res.error_kind) == (False, "infra_error")
    assert "OutOfMemoryError" in res.error_msg and "retried_infra_error" in res.flags
    monkeypatch.setattr(case_checks_mod, "compare", real)
    assert ev.evaluate(task, make_candidate(task.task_id, "relu", code)).exec_ok


HANG_IN_CALL = '''
import torch
import triton
import triton.language as tl

_N = [0]


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0).to(x.dtype), mask=m)


def relu(x):
    _N[0] += 1
    while _N[0] > {after}:
        pass
    y = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


@pytest.mark.parametrize("where,after,cpu_timing", [("import", None, False), ("call", 0, False),
                                                    ("timing", 30, True)])
def test_every_evaluation_ends_within_its_budget(where, after, cpu_timing):
    budget = 6.0
    e = Evaluator(EvalConfig(device="cpu", eval_budget_s=budget, case_timeout_s=300,
                             load_timeout_s=300, cpu_timing=cpu_timing,
                             timing=TimingConfig(min_reps=80, max_reps=80, budget_s=0.0)))
    try:
        task = _one_case("activation/relu", "size1")
        code = ((EXPLOITS / "hang_at_import.py").read_text() if where == "import"
                else HANG_IN_CALL.replace("{after}", str(after)))
        e.sandbox.write_code("warm", "")  # the worker's start is not the candidate's time,
        e.replay.start()  # nor the replay process's
        t0 = time.perf_counter()
        res = e.evaluate(task, make_candidate(task.task_id, "relu", code))
        wall = time.perf_counter() - t0
        assert (res.exec_ok, res.error_kind) == (False, "timeout"), res.error_msg
        assert wall < budget + 3.0, wall
        assert "eval_budget_s" in res.error_msg
        good = e.evaluate(task, make_candidate(task.task_id, "relu",
                                               Path(task.solution_path).read_text()))
        assert good.exec_ok, good.error_msg
    finally:
        e.close()


def test_a_worker_start_is_not_the_candidates_time(monkeypatch: pytest.MonkeyPatch):
    """A fresh worker (first use, after the previous candidate's hang was killed, a recycle) starts
    off the candidate's budget: each start here takes longer than the whole budget, and an honest
    kernel still passes, after a hang's kill too (the good kernel after a hang used to pay for the
    restart and time out on a loaded CI box)."""
    from kbx_ray.evaluate.parent.sandbox import Sandbox

    budget, spawn = 6.0, Sandbox._spawn

    def slow_spawn(self: Sandbox) -> None:
        time.sleep(budget + 1.0)
        spawn(self)
    monkeypatch.setattr(Sandbox, "_spawn", slow_spawn)
    e = Evaluator(EvalConfig(device="cpu", eval_budget_s=budget, case_timeout_s=300,
                             load_timeout_s=300))
    try:
        task = _one_case("activation/relu", "size1")
        good = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())
        first = e.evaluate(task, good)
        assert first.exec_ok, first.error_msg
        e.sandbox.kill()  # as after a hang
        again = e.evaluate(task, good)
        assert again.exec_ok, again.error_msg
        assert e.sandbox.spawns == 2
    finally:
        e.close()


INPLACE_TASK = '''"""In-place add: `add_(x, y)` adds y into x and returns x (the `out=`/in-place contract)."""
import torch

CATEGORY = "Math"
LEVEL = 1
MUTATES = ("x",)
CASES = [{"name": "small", "small": True, "n": 1000}]


def add_(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (in place, returns its input)."""
    return x.add_(y)


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    g = torch.Generator(device).manual_seed(seed)
    return (torch.randn(case["n"], generator=g, device=device),
            torch.randn(case["n"], generator=g, device=device)), {}


def cost(case: dict) -> dict:
    return {"flops": case["n"], "bytes": 12 * case["n"]}
'''

INPLACE_SOLUTION = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def add_(x, y):
    _add[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return x
'''


def test_an_output_that_is_the_mutated_input_is_not_aliasing(ev, tmp_path):
    (tmp_path / "math" / "add_").mkdir(parents=True)
    path = tmp_path / "math" / "add_" / "task.py"
    path.write_text(INPLACE_TASK)
    task = task_from_file(path, tmp_path)
    res = ev.evaluate(task, make_candidate(task.task_id, "add_", INPLACE_SOLUTION))
    assert res.exec_ok, res.error_msg
    other = INPLACE_SOLUTION.replace("return x\n", "return y\n")  # a non-mutated input: aliasing
    res = ev.evaluate(task, make_candidate(task.task_id, "add_", other))
    assert (res.exec_ok, res.error_kind) == (False, "output_aliases_input"), res.error_msg


def test_a_content_cache_passes_the_rotation_alone_and_the_fresh_sets_catch_it():
    """The attack is real: with no fresh sets and no replay every check of the rotation passes (its
    outputs are right, its objects new, its calls launch); the fresh sets' times show the misses,
    and so, on their own, does the recorded program timed alone (its cached timed calls are far
    faster than the kernels they claim to run)."""
    task = _one_case("activation/relu")
    path = EXPLOITS / "c6_content_cache_hash.py"
    timing = TimingConfig(min_reps=40, max_reps=40, budget_s=0.0)
    for fresh, replay, want in ((0, "off", (True, "")), (2, "off", (False, "timing_invalid")),
                                (0, "on", (False, "timing_invalid"))):
        # 40 timed reps of the program under the interpreter: room for a loaded 2-core box
        e = Evaluator(EvalConfig(device="cpu", cpu_timing=True, fresh_sets=fresh, replay=replay,
                                 case_timeout_s=300, load_timeout_s=60, timing=timing))
        try:
            res = _judge(e, task, path)
        finally:
            e.close()
        assert (res.exec_ok, res.error_kind) == want, res.error_msg


def test_a_worker_harness_failure_is_infra_error_retried_once(ev, tmp_path):
    """The worker's own code failing (on the H100 an OOM while `time` drew its input sets on a
    shared GPU) is `infra_error`, retried once on a fresh worker, never the candidate's verdict."""
    relu = _one_case("activation/relu", "size1")
    code = Path(relu.solution_path).read_text()
    assert ev.evaluate(relu, make_candidate(relu.task_id, "relu", code)).exec_ok  # a warm worker
    pid = ev.sandbox.proc.pid  # its input draw fails; a fresh worker's does not
    src = Path(relu.path).read_text().replace(
        '    g = torch.Generator(device).manual_seed(seed)\n', f'''    import os
    if os.getpid() == {pid}:  # the harness fails in this worker, not the candidate
        raise RuntimeError("CUDA out of memory (simulated in the worker's input draw)")
    g = torch.Generator(device).manual_seed(seed)
''', 1)
    (tmp_path / "activation" / "relu").mkdir(parents=True)
    path = tmp_path / "activation" / "relu" / "task.py"
    path.write_text(src)
    task = replace(task_from_file(path, tmp_path), cases=relu.cases)
    res = ev.evaluate(task, make_candidate(task.task_id, "relu", code))
    assert ev.sandbox.proc.pid != pid  # the failing worker was replaced
    assert res.exec_ok and "retried_infra_error" in res.flags, res.error_msg
