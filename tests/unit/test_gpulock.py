"""The cross-process GPU lock: shared work overlaps, timing runs alone, and timing is not starved."""
from __future__ import annotations

import multiprocessing as mp
import time

from kbx_ray.evaluate.gpulock import GpuLock


def _worker(root: str, mode: str, hold: float, delay: float, q, held=None) -> None:
    time.sleep(delay)
    lock = GpuLock("gpu-test", root)
    with getattr(lock, mode)():
        t0 = time.monotonic()
        if held is not None:
            held.set()  # the test waits for this, not for a guessed delay
        time.sleep(hold)
        q.put((mode, t0, time.monotonic()))
    lock.close()


def _run(tmp_path, plan):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), m, h, d, q)) for m, h, d in plan]
    for p in procs:
        p.start()
    spans = [q.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(10)
    return spans


def _overlap(a, b) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_shared_holders_overlap_and_exclusive_runs_alone(tmp_path):
    spans = _run(tmp_path, [("shared", 0.6, 0.0), ("shared", 0.6, 0.0), ("exclusive", 0.3, 0.2),
                            ("shared", 0.3, 0.4)])
    shared = [s for s in spans if s[0] == "shared"]
    excl = [s for s in spans if s[0] == "exclusive"]
    assert _overlap(shared[0], shared[1]) or _overlap(shared[0], shared[2]), spans
    assert not any(_overlap(excl[0], s) for s in shared), spans


def test_writer_goes_before_later_readers(tmp_path):
    """A reader that arrives while timing waits must queue behind it, not overtake it."""
    spans = _run(tmp_path, [("shared", 0.5, 0.0), ("exclusive", 0.2, 0.15), ("shared", 0.2, 0.3)])
    excl = next(s for s in spans if s[0] == "exclusive")
    late = max((s for s in spans if s[0] == "shared"), key=lambda s: s[1])
    assert excl[2] <= late[1] + 1e-3, spans


def test_a_killed_holder_releases_the_lock(tmp_path):
    ctx = mp.get_context("fork")
    held = ctx.Event()
    p = ctx.Process(target=_worker, args=(str(tmp_path), "exclusive", 60, 0.0, ctx.Queue(), held))
    p.start()
    assert held.wait(30), "the holder never took the lock"  # killed while holding it, not before
    p.kill()
    p.join(5)
    lock = GpuLock("gpu-test", str(tmp_path))
    t0 = time.monotonic()
    with lock.exclusive():
        pass
    assert time.monotonic() - t0 < 2


def test_wait_and_exclusive_hold_are_accounted(tmp_path):
    """The counters the evaluator reports (stage_s lock_wait / exclusive) follow real waits."""
    ctx = mp.get_context("fork")
    q, held = ctx.Queue(), ctx.Event()
    holder = ctx.Process(target=_worker, args=(str(tmp_path), "exclusive", 0.5, 0.0, q, held))
    holder.start()
    assert held.wait(30), "the holder never took the lock"  # it has the lock now
    lock = GpuLock("gpu-test", str(tmp_path))
    with lock.shared():
        pass
    waited = lock.wait_s
    with lock.exclusive():
        time.sleep(0.2)
    holder.join(10)
    q.get(timeout=5)
    lock.close()
    assert 0.2 < waited < 2.0  # blocked behind the 0.5 s exclusive holder
    assert 0.2 <= lock.exclusive_s < 1.0
    assert lock.wait_s - waited < 0.2  # nobody held it the second time
