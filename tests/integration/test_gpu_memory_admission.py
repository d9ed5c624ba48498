"""A shared GPU (issue 27 item 7): an out-of-memory error while another evaluator holds memory on
the same device is `infra_error` (flag `oom_shared_gpu`), retried once alone, and the retry's
verdict is the record; an OOM with no one else holding memory stays the candidate's.

No GPU here: the evaluator gets a ledger handed in (the device-memory query is injected), another
REAL process holds a reservation in it through gpu_memory, and the candidate, run by the real
worker, raises torch.OutOfMemoryError with CUDA's text, as the allocator does when the device is
full. The first attempt's code is the OOM; the retry's is the honest solution (or the OOM again)."""
from __future__ import annotations

import multiprocessing as mp
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

# the honest solution with its entry point raising: the replay finds the same kernels as the
# retry's worker runs (the test hands the worker other code than the candidate's)
OOM = Path(get_task("activation/relu").solution_path).read_text() + '''

def relu(x: torch.Tensor) -> torch.Tensor:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                                 "total capacity of 139.81 GiB of which 1.12 GiB is free.")
'''
BUDGET = 16 << 30


def _hold(root: str, nbytes: int, ready, release) -> None:
    """Another evaluator: hold `nbytes` on the same device until told to let go."""
    led = MemoryLedger("gpu-shared", BUDGET, root)
    with led.reserve(nbytes):
        ready.set()
        release.wait(120)


@pytest.fixture(scope="module")
def relu_task():
    task = get_task("activation/relu")
    return replace(task, cases=tuple(c for c in task.cases if c["small"])[:1])


@pytest.fixture()
def ev(tmp_path):
    led = MemoryLedger("gpu-shared", BUDGET, str(tmp_path))
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0),
                  memory=led)
    yield e, led
    e.close()


def _codes(e: Evaluator, codes: list[str], led: MemoryLedger, seen: list) -> None:
    """The worker gets `codes` in turn, one per attempt; each write notes who held what."""
    real = e.sandbox.write_code

    def write(name: str, code: str) -> str:
        seen.append(sorted(pid for pid, _ in led.holdings().values()))
        return real(name, codes[min(len(seen) - 1, len(codes) - 1)])

    e.sandbox.write_code = write


def _holder(tmp_path: Path):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold, args=(str(tmp_path), 8 << 30, ready, release))
    p.start()
    assert ready.wait(60)
    return p, release


def _release_when_alone_claimed(led: MemoryLedger, release) -> threading.Thread:
    """Let the other evaluator go only once the retry has claimed the device: the retry must
    wait for it (the first attempt ran beside it)."""
    def watch() -> None:
        while not release.is_set():
            if any(k.endswith(".alone") for k in led.holdings()):
                release.set()
            threading.Event().wait(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_an_oom_beside_another_holder_is_infra_error_retried_alone(ev, relu_task, tmp_path):
    e, led = ev
    p, release = _holder(tmp_path)
    seen: list = []
    honest = Path(relu_task.solution_path).read_text()
    _codes(e, [OOM, honest], led, seen)
    watcher = _release_when_alone_claimed(led, release)
    try:
        res = e.evaluate(relu_task, make_candidate(relu_task.task_id, "relu", OOM))
    finally:
        release.set()
        p.join(30)
        watcher.join(5)
    assert res.exec_ok, res.error_msg  # the retry's verdict is the record
    assert "oom_shared_gpu" in res.flags and "retried_infra_error" in res.flags, res.flags
    import os
    assert seen[0] == sorted([p.pid, os.getpid()])  # the first attempt ran beside the holder
    assert seen[1] == [os.getpid()]  # the retry ran alone: it waited for the holder to leave
    assert res.stage_s["mem_wait"] > 0
    assert not led.holdings()  # every reservation released


def test_an_oom_that_persists_alone_is_the_candidates(ev, relu_task, tmp_path):
    e, led = ev
    p, release = _holder(tmp_path)
    seen: list = []
    _codes(e, [OOM], led, seen)
    watcher = _release_when_alone_claimed(led, release)
    try:
        res = e.evaluate(relu_task, make_candidate(relu_task.task_id, "relu", OOM))
    finally:
        release.set()
        p.join(30)
        watcher.join(5)
    assert (res.exec_ok, res.error_kind) == (False, "runtime_error"), res.error_msg
    assert "CUDA out of memory" in res.error_msg
    assert "oom_shared_gpu" in res.flags and "retried_infra_error" in res.flags
    assert len(seen) == 2


def test_an_oom_with_no_one_else_holding_memory_is_the_candidates(ev, relu_task):
    e, led = ev
    seen: list = []
    _codes(e, [OOM], led, seen)
    res = e.evaluate(relu_task, make_candidate(relu_task.task_id, "relu", OOM))
    assert (res.exec_ok, res.error_kind) == (False, "runtime_error"), res.error_msg
    assert not {"oom_shared_gpu", "retried_infra_error"} & set(res.flags)
    assert len(seen) == 1  # no retry
    import os
    assert seen[0] == [os.getpid()]  # the evaluation held its reservation while it ran


def test_the_worker_releases_what_the_last_evaluation_left(ev, relu_task):
    """`release` (worker/main.py), sent after each evaluation on a GPU before the reservation goes:
    the warm worker drops the last candidate's buffers; here only that the op answers."""
    e, _ = ev
    e.evaluate(relu_task, make_candidate(relu_task.task_id, "relu",
                                         Path(relu_task.solution_path).read_text()))
    reply, _ = e.sandbox.request({"op": "release"}, 30)
    assert reply.get("ok"), reply


def test_every_process_keeps_at_most_one_footprint_of_an_evaluations_inputs(ev, relu_task):
    """Each evaluation's seeds are its own, so what a process keeps of its inputs and reference
    outputs serves only it; an H100 parent kept 3-9 GiB of them for evaluations reserved at 4-11
    in all. With a ledger, this process, the worker (`load`) and the replay process (each
    request) keep at most the largest case's footprint, which the estimate counts."""
    import torch

    from kbx_ray.evaluate.common.inputs import InputCache
    from kbx_ray.suites.task_import import load_module

    e, _ = ev
    sent: list = []
    for sandbox in (e.sandbox, e.replay.sandbox):
        real = sandbox.send

        def send(header, timeout, real=real):
            sent.append((header.get("op"), header.get("cache_bytes")))
            return real(header, timeout)

        sandbox.send = send
    res = e.evaluate(relu_task, make_candidate(relu_task.task_id, "relu",
                                               Path(relu_task.solution_path).read_text()))
    assert res.exec_ok, res.error_msg
    mod = load_module(relu_task.path)
    largest = e.memory.largest(mod, list(relu_task.cases))
    assert 0 < largest < 1 << 20  # a small case: kilobytes, where the caps were gigabytes
    assert e.inputs.limit == e.refs.limit == e.replay.cache_bytes == largest
    assert ("load", largest) in sent and ("replay", largest) in sent, sent
    # a size unknown (a footprint that failed) caps nothing in any of the three, as sent (0)
    assert e.memory.cache_limit(0) is None and e.memory.cache_limit(largest) == largest
    # the cache itself: within the limit, an item over a quarter of it is handed out unkept
    cache = InputCache(4 << 30)
    cache.limit = 4 * 64 * 4
    small, big = {"name": "s", "n": 64}, {"name": "b", "n": 512}

    class Mod:
        @staticmethod
        def make_inputs(case, seed, device):
            return (torch.zeros(case["n"]),)

    cache.get(Mod, "k", small, 1, "cpu")
    cache.get(Mod, "k", big, 1, "cpu")
    assert [k[1] for k in cache.items] == ["s"] and cache.bytes == 256
