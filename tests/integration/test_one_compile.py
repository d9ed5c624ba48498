"""One compile (parent/one_compile.py): before the correctness stage the worker's traced copy
names each case's launches (worker/trace_ops.py) and the replay process compiles them. On the CPU
nothing is compiled, so `evaluation.one_compile=on` here checks the rest with real workers: the trace finds
each case's launches, it runs in a forked copy whose state dies with it (a candidate's first-call
setup is not consumed by it), a copy that hangs costs one bounded wait, and the verdict is the
one given without it."""
from __future__ import annotations

import pytest

from kbx_ray.evaluate.parent import one_compile
from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

RELU = '''
import torch
import triton
import triton.language as tl

STATE = {}


@triton.jit
def _table(t_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(t_ptr + offs, tl.full([BLOCK], 1.0, tl.float32))


@triton.jit
def _relu(x_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    one = tl.load(t_ptr + offs % 16)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * one.to(x.dtype), mask=offs < n)


def relu(x: torch.Tensor) -> torch.Tensor:
    SPIN
    if "table" not in STATE:  # built by a kernel on the first call, then reused
        t = torch.empty(16, device=x.device, dtype=torch.float32)
        _table[(1,)](t, BLOCK=16)
        STATE["table"] = t
    x = x.contiguous()
    y = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 1024),)](x, STATE["table"], y, x.numel(), BLOCK=1024)
    return y
'''


def _evaluate(mode: str, code: str):
    task = get_task("activation/relu")
    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0,
                              one_compile=mode))
    try:
        res = ev.evaluate(task, make_candidate(task.task_id, task.name, code))
        return res, set(ev.replay.warmed), [c["name"] for c in ev.cases_for(task)]
    finally:
        ev.close()


def test_each_case_is_traced_in_a_copy_and_the_verdict_stands():
    """The table the first call builds with a kernel is built by the worker, not consumed by the
    traced copy (where no kernel runs): a trace in the worker itself would leave it unwritten."""
    res, warmed, cases = _evaluate("on", RELU.replace("SPIN", "pass"))
    assert res.exec_ok, f"{res.error_kind}: {res.error_msg}"
    assert res.stage_s["w_trace"] > 0 and "trace_missed" not in res.stage_s, res.stage_s
    assert warmed == set(cases)  # every case's kernels went to the replay before its first call
    off, warmed_off, _ = _evaluate("off", RELU.replace("SPIN", "pass"))
    assert off.exec_ok and "w_trace" not in off.stage_s
    assert [c.ok for c in off.cases] == [c.ok for c in res.cases]


def test_a_candidate_failing_its_first_case_pays_for_no_other_cases_compiles():
    wrong = RELU.replace("SPIN", "pass").replace("* one.to(x.dtype)", "* 2.0")
    res, warmed, cases = _evaluate("on", wrong)
    assert (res.exec_ok, res.error_kind) == (False, "mismatch"), res.error_msg
    assert warmed == {cases[0]} and "trace_missed" not in res.stage_s, (warmed, res.stage_s)


def test_a_copy_that_hangs_costs_one_bounded_wait(monkeypatch):
    """Host code that spins only where it sees meta tensors (it knows it is traced): the copy is
    killed at the bound, every case is compiled as before, and the candidate is judged as
    without it."""
    monkeypatch.setattr(one_compile, "TRACE_S", 2.0)
    spin = "while x.device.type == 'meta':\n        pass"
    res, warmed, cases = _evaluate("on", RELU.replace("SPIN", spin))
    assert res.exec_ok, f"{res.error_kind}: {res.error_msg}"
    assert 2.0 <= res.stage_s["w_trace"] < 8.0, res.stage_s
    assert res.stage_s["trace_missed"] == len(cases), res.stage_s


@pytest.mark.parametrize("after", ["", "; import time; time.sleep(1)"], ids=["ends", "outlives"])
def test_a_trace_that_kills_its_worker_is_retried_untraced(static_off, after):
    """The copy kills the worker (static layer off: `os` is refused there): the evaluation is
    retried once on a fresh worker without the trace, and the verdict is the candidate's. A copy
    that outlives the worker (its own write then fails) never answers the worker's requests:
    it used to, and the next request then went to a fresh worker without the candidate."""
    kill = "if x.device.type == 'meta':\n        import os, signal\n" \
           "        os.kill(os.getppid(), signal.SIGKILL)" + after
    task = get_task("activation/relu")
    ev = Evaluator(EvalConfig(device="cpu", monitor="off", case_timeout_s=60, load_timeout_s=60,
                              unseen_cases=0, one_compile="on"))
    try:
        res = ev.evaluate(task, make_candidate(task.task_id, task.name,
                                               RELU.replace("SPIN", kill)))
        assert res.exec_ok, f"{res.error_kind}: {res.error_msg}"
        assert "retried_infra_error" in res.flags and "w_trace" not in res.stage_s
        again = ev.evaluate(task, make_candidate(task.task_id, task.name,
                                                 RELU.replace("SPIN", "pass")))
        assert again.exec_ok and again.stage_s["w_trace"] > 0  # the next candidate is traced
    finally:
        ev.close()


def test_the_traced_copy_cannot_plant_in_the_replays_cache(static_off):
    """Attack: the copy runs before the replay process compiles, so it tries to plant an entry in
    that process's Triton cache (a kernel the replay would then load as its own). Under Landlock
    the copy writes only the worker's temp dir; with it off the plant lands, so this can fail."""
    import glob
    import os
    import tempfile

    from kbx_ray.evaluate.settings import SandboxConfig

    root = tempfile.gettempdir()
    plant = ("if x.device.type == 'meta':\n        import glob, os\n"
             f"        for d in glob.glob({root!r} + '/kbx_sbx_*/triton_cache'):\n"
             "            try:\n                os.makedirs(d + '/planted_by_trace', exist_ok=True)\n"
             "            except OSError:\n                pass")
    task = get_task("activation/relu")
    planted = {}
    for landlock in ("auto", "off"):
        ev = Evaluator(EvalConfig(device="cpu", monitor="off", case_timeout_s=60,
                                  load_timeout_s=60, unseen_cases=0, one_compile="on",
                                  sandbox=SandboxConfig(landlock=landlock)))
        try:
            res = ev.evaluate(task, make_candidate(task.task_id, task.name,
                                                   RELU.replace("SPIN", plant)))
            assert res.exec_ok, f"{res.error_kind}: {res.error_msg}"
            replay_cache = os.path.join(ev.replay.sandbox.home, "triton_cache")
            planted[landlock] = os.path.isdir(os.path.join(replay_cache, "planted_by_trace"))
        finally:
            ev.close()
    for d in glob.glob(os.path.join(root, "kbx_sbx_*", "triton_cache", "planted_by_trace")):
        os.rmdir(d)
    assert planted == {"auto": False, "off": True}, planted


def test_auto_traces_only_on_a_gpu():
    ev = Evaluator(EvalConfig(device="cpu", one_compile="auto"))
    try:
        assert not one_compile.wanted(ev)
        ev.cfg.one_compile = "on"
        assert one_compile.wanted(ev)
    finally:
        ev.close()


def test_nearly_every_solution_traces_its_first_case():
    """The suite's 176 solutions, each loaded in one real CPU worker and traced on its first case:
    the copy names at least one launch for all but those whose host code needs values (`.item()`
    on a meta tensor), which the worker then compiles itself."""
    from pathlib import Path

    from kbx_ray.suites.builtin import load_suite

    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0))
    traced, missed = 0, {}
    try:
        ev._start_worker()
        for i, task in enumerate(sorted(load_suite(), key=lambda t: t.task_id)):
            path = ev.sandbox.write_code(f"kbx_cand_s{i}", Path(task.solution_path).read_text())
            ev.sandbox.request({"op": "load", "code_path": path, "task_path": task.path,
                                "entry": task.name, "module": f"s{i}", "task_key": task.task_hash,
                                "monitor": True, "deny": True, "cache_bytes": 0}, 60)
            ev.sandbox.request({"op": "mirror", "cases": ev.cases_for(task)[:1], "seed": 1}, 30)
            reply, _ = ev.sandbox.request({"op": "trace", "timeout_s": 10}, 30)
            prog = (reply.get("programs") or [{}])[0]
            if any(s["op"] == "launch" for s in prog.get("steps", [])):
                traced += 1
            else:
                missed[task.task_id] = str(prog or reply)[:200]
    finally:
        ev.close()
    assert traced + len(missed) == 176
    assert traced >= 170, missed
    assert all("meta" in why for why in missed.values()), missed


def test_only_the_draw_holds_the_gpu():
    """The worker draws each case's inputs under a shared GPU hold (`mirror`), then lets it go:
    the copy runs on meta tensors and cannot reach the GPU, so no other evaluator's timing waits
    behind the candidate's host code on them (`trace`)."""
    import contextlib

    task = get_task("activation/relu")
    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0,
                              one_compile="on"))
    held, sent = [False], []
    shared, request = ev.lock.shared, ev.sandbox.request

    @contextlib.contextmanager
    def watched_shared(label="hold"):
        with shared(label):
            held[0] = True
            try:
                yield
            finally:
                held[0] = False

    def watched_request(header, timeout):
        sent.append((header.get("op"), held[0]))
        return request(header, timeout)

    ev.lock.shared, ev.sandbox.request = watched_shared, watched_request
    try:
        res = ev.evaluate(task, make_candidate(task.task_id, task.name,
                                               RELU.replace("SPIN", "pass")))
    finally:
        ev.close()
    assert res.exec_ok and "trace_missed" not in res.stage_s, (res.error_msg, res.stage_s)
    assert res.stage_s["seed_s"] >= 0 and "seeded" in res.stage_s  # the copy timed, each warm
    assert ("mirror", True) in sent and ("trace", False) in sent, sent
    assert ("run", True) in sent  # the calls themselves still hold it
