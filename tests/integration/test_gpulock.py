"""The cross-process GPU lock: shared work overlaps, timing runs alone, and timing is not starved."""
from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import time

import pytest

from kbx_ray.evaluate.parent.gpulock import GpuLock

pytestmark = pytest.mark.slow  # starts lock holders in other processes


def _worker(root: str, mode: str, hold: float, q, held=None, release=None) -> None:
    """Take the lock in `mode`, say so (`held`), keep it `hold` s or until `release` is set (the
    hold is the work under test; the test orders the holders by these events, not by delays)."""
    lock = GpuLock("gpu-test", root)
    with getattr(lock, mode)():
        t0 = time.monotonic()
        if held is not None:
            held.set()  # the test waits for this, not for a guessed delay
        if release is not None:
            assert release.wait(30), "the test never released the holder"
        else:
            time.sleep(hold)
        q.put((mode, t0, time.monotonic()))
    lock.close()


def _writer_waiting(root: str, timeout_s: float = 30.0) -> None:
    """Until a writer waits at the turnstile: it holds the turnstile from its arrival until it is
    done, and a reader holds it only for the instant of taking its shared lock."""
    fd = os.open(GpuLock("gpu-test", root).paths[0], os.O_RDWR | os.O_CREAT, 0o666)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
            assert time.monotonic() < deadline, "no writer came to the turnstile"
            time.sleep(0.01)
    finally:
        os.close(fd)


def _readers_then_writer_then_reader(tmp_path, early_readers: int):
    """`early_readers` shared holders take the lock together; a writer (0.3 s) arrives while they
    hold it, then a late reader (0.3 s) arrives while the writer waits; then the early readers let
    go. Returns every holder's (mode, start, end), the late reader last."""
    ctx = mp.get_context("fork")
    q, release, root = ctx.Queue(), ctx.Event(), str(tmp_path)
    helds = [ctx.Event() for _ in range(early_readers)]
    procs = [ctx.Process(target=_worker, args=(root, "shared", 0.0, q, h, release)) for h in helds]
    for p in procs:
        p.start()
    for h in helds:  # all of them at once: shared holders do not exclude each other
        assert h.wait(30), "an early reader never took the shared lock"
    procs.append(ctx.Process(target=_worker, args=(root, "exclusive", 0.3, q)))
    procs[-1].start()
    _writer_waiting(root)
    late_q = ctx.Queue()
    procs.append(ctx.Process(target=_worker, args=(root, "shared", 0.3, late_q)))
    procs[-1].start()
    release.set()
    spans = [q.get(timeout=30) for _ in range(early_readers + 1)] + [late_q.get(timeout=30)]
    for p in procs:
        p.join(10)
    return spans


def _overlap(a, b) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_shared_holders_overlap_and_exclusive_runs_alone(tmp_path):
    spans = _readers_then_writer_then_reader(tmp_path, early_readers=2)
    shared = [s for s in spans if s[0] == "shared"]
    excl = [s for s in spans if s[0] == "exclusive"]
    assert _overlap(shared[0], shared[1]) or _overlap(shared[0], shared[2]), spans
    assert not any(_overlap(excl[0], s) for s in shared), spans


def test_writer_goes_before_later_readers(tmp_path):
    """A reader that arrives while timing waits must queue behind it, not overtake it."""
    spans = _readers_then_writer_then_reader(tmp_path, early_readers=1)
    excl = next(s for s in spans if s[0] == "exclusive")
    late = spans[-1]
    assert excl[2] <= late[1] + 1e-3, spans


def test_a_killed_holder_releases_the_lock(tmp_path):
    ctx = mp.get_context("fork")
    held = ctx.Event()
    p = ctx.Process(target=_worker, args=(str(tmp_path), "exclusive", 60, ctx.Queue(), held))
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
    holder = ctx.Process(target=_worker, args=(str(tmp_path), "exclusive", 0.5, q, held))
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


def test_a_long_shared_hold_lets_a_waiting_writer_in_between_its_steps(tmp_path):
    """A reader working through many steps (a case's seeds) checks between them: with no writer
    waiting it keeps its hold; once one waits, it steps out, the writer runs, and the reader goes
    on after it, never beside it."""
    ctx = mp.get_context("fork")
    q, root = ctx.Queue(), str(tmp_path)
    lock = GpuLock("gpu-test", root)
    with lock.shared():
        assert not lock.writer_waiting()
        lock.let_writer_in()  # nobody waits: a no-op
        assert lock.yields == 0
        w = ctx.Process(target=_worker, args=(root, "exclusive", 0.2, q))
        w.start()
        _writer_waiting(root)
        assert lock.writer_waiting()
        lock.let_writer_in()
        resumed = time.monotonic()
        assert lock.yields == 1
        mode, t0, t1 = q.get(timeout=30)  # the writer ran while we stood aside, and is done
        assert mode == "exclusive" and t1 <= resumed
    w.join(30)
    lock.close()


def test_an_inner_hold_never_steps_out(tmp_path):
    """At depth 2 the outer hold's work may still be on the GPU: a waiting writer stays waiting."""
    ctx = mp.get_context("fork")
    q, root = ctx.Queue(), str(tmp_path)
    lock = GpuLock("gpu-test", root)
    with lock.shared():
        w = ctx.Process(target=_worker, args=(root, "exclusive", 0.2, q))
        w.start()
        _writer_waiting(root)
        with lock.shared():
            lock.let_writer_in()
        assert lock.yields == 0 and q.empty() and lock.writer_waiting()
    assert q.get(timeout=30)[0] == "exclusive"  # it runs once the outer hold ends
    w.join(30)
    lock.close()


def test_a_writer_waiting_for_shared_holds_counts_it_as_drain(tmp_path):
    """`drain_s`: through the turnstile, waiting for a shared hold in flight to end (no new shared
    work starts meanwhile); waiting behind another writer is not drain."""
    ctx = mp.get_context("fork")
    q, held = ctx.Queue(), ctx.Event()
    holder = ctx.Process(target=_worker, args=(str(tmp_path), "shared", 0.5, q, held))
    holder.start()
    assert held.wait(30), "the holder never took the lock"
    lock = GpuLock("gpu-test", str(tmp_path))
    with lock.exclusive():
        pass
    holder.join(10)
    q.get(timeout=5)
    assert 0.2 < lock.drain_s < 2.0 and lock.drain_s <= lock.wait_excl_s
    held2 = ctx.Event()
    writer = ctx.Process(target=_worker, args=(str(tmp_path), "exclusive", 0.5, q, held2))
    writer.start()
    assert held2.wait(30)
    drained = lock.drain_s
    with lock.exclusive():  # behind a writer: the turnstile waits, the drain does not
        pass
    writer.join(10)
    q.get(timeout=5)
    lock.close()
    assert lock.drain_s - drained < 0.2 < lock.wait_excl_s - drained


def _queued_writers(root: str, n: int, timeout_s: float = 30.0) -> None:
    """Until `n` writers are queued: each holds the writers' file shared from its arrival on
    (/proc/locks lists the granted flocks by inode; a blocked request carries '->')."""
    ino = os.stat(GpuLock("gpu-test", root).paths[2]).st_ino
    deadline = time.monotonic() + timeout_s
    while True:
        with open("/proc/locks") as f:
            held = [ln for ln in f if "->" not in ln and "FLOCK" in ln and " READ " in ln
                    and ln.split()[5].endswith(f":{ino}")]
        if len(held) >= n:
            return
        assert time.monotonic() < deadline, f"{len(held)} of {n} writers queued"
        time.sleep(0.01)


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")
def test_queued_writers_run_back_to_back_before_a_later_reader(tmp_path):
    """Two writers queue behind a reader's hold and a reader arrives after them: both writers
    run before it (one drain serves them both), never beside anyone."""
    ctx = mp.get_context("fork")
    q, release, held, root = ctx.Queue(), ctx.Event(), ctx.Event(), str(tmp_path)
    procs = [ctx.Process(target=_worker, args=(root, "shared", 0.0, q, held, release))]
    procs[0].start()
    assert held.wait(30), "the first reader never took the shared lock"
    for n in (1, 2):
        procs.append(ctx.Process(target=_worker, args=(root, "exclusive", 0.2, q)))
        procs[-1].start()
        _queued_writers(root, n)
    lock = GpuLock("gpu-test", root)
    assert lock.writer_waiting()
    late_q = ctx.Queue()
    procs.append(ctx.Process(target=_worker, args=(root, "shared", 0.1, late_q)))
    procs[-1].start()
    release.set()
    spans = [q.get(timeout=30) for _ in range(3)]
    late = late_q.get(timeout=30)
    for p in procs:
        p.join(10)
    lock.close()
    writers = [s for s in spans if s[0] == "exclusive"]
    assert len(writers) == 2 and not _overlap(*writers), spans
    assert all(w[2] <= late[1] + 1e-3 for w in writers), (spans, late)


def test_a_released_hold_lets_a_writer_run_during_its_body_then_holds_again(tmp_path):
    """`released`: host work (a compile) with the hold let go; a writer waiting runs meanwhile,
    and after the body the hold is back (the next writer waits for it again)."""
    ctx = mp.get_context("fork")
    q, root = ctx.Queue(), str(tmp_path)
    lock = GpuLock("gpu-test", root)
    with lock.shared():
        w = ctx.Process(target=_worker, args=(root, "exclusive", 0.1, q))
        w.start()
        _writer_waiting(root)
        with lock.released():
            mode, t0, t1 = q.get(timeout=30)  # the writer ran inside the body
            assert mode == "exclusive"
        w.join(30)
        assert lock.depth == 1
        w2 = ctx.Process(target=_worker, args=(root, "exclusive", 0.0, q))
        w2.start()
        _writer_waiting(root)
        time.sleep(0.2)
        assert q.empty()  # held again: the second writer waits for this hold's end
        ended = time.monotonic()
    assert q.get(timeout=30)[1] >= ended
    w2.join(30)
    lock.close()


def test_steps_that_end_with_a_writer_waiting_count_as_holding_it_up(tmp_path):
    """`held_up` (profiling: which shared steps make a timing wait): a step that ends with no
    writer waiting adds nothing; one that ends with a writer waiting adds its whole length under
    the label its end gives, at a step boundary (`let_writer_in`, `released`) or the hold's end."""
    ctx = mp.get_context("fork")
    q, root = ctx.Queue(), str(tmp_path)
    lock = GpuLock("gpu-test", root)
    with lock.shared("whole"):
        time.sleep(0.05)
        lock.let_writer_in("alone")  # nobody waits: nothing counted
        assert lock.held_up == {}
        w = ctx.Process(target=_worker, args=(root, "exclusive", 0.0, q))
        w.start()
        _writer_waiting(root)
        time.sleep(0.2)
        lock.let_writer_in("seed")  # the writer waited for this step: counted, then let in
        assert q.get(timeout=30)[0] == "exclusive"
        w.join(30)
        assert 0.2 <= lock.held_up["seed"] < 30
        w2 = ctx.Process(target=_worker, args=(root, "exclusive", 0.0, q))
        w2.start()
        _writer_waiting(root)
        time.sleep(0.1)
    assert q.get(timeout=30)[0] == "exclusive"  # it ran once the hold ended
    w2.join(30)
    totals = lock.totals()
    lock.close()
    assert set(lock.held_up) == {"seed", "whole"} and "alone" not in lock.held_up
    assert 0.1 <= lock.held_up["whole"] < lock.held_up["seed"]  # counted from the step's start
    assert totals["hu_seed"] == lock.held_up["seed"] and totals["lock_drain"] == lock.drain_s
