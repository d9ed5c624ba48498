"""A readers-writer lock shared by every evaluator process on one GPU.

Correctness work takes it shared, timing exclusively, so nothing else runs on the GPU while a
kernel is timed. Writers go first (a turnstile), and writers queued together run back to back
(each holds a third file shared from arrival to end; readers wait until none is queued): one drain
of the shared work in flight serves them all. `flock` locks die with their process, so a killed
evaluator never leaves the GPU locked. More: kbx_ray/evaluate/parent/README.md, `gpulock.py`.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class GpuLock:
    def __init__(self, key: str, root: str | None = None) -> None:
        base = Path(root or tempfile.gettempdir())
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)[:80]
        self.paths = (base / f"kbx_gpu_{safe}.turnstile", base / f"kbx_gpu_{safe}.lock",
                      base / f"kbx_gpu_{safe}.writers")
        self._fds: tuple[int, int, int] | None = None
        self.depth = 0  # re-entrant within one process: an inner request keeps the outer mode
        self.wait_s = 0.0  # time spent waiting for the lock, either mode (a running total)
        self.wait_excl_s = 0.0  # of it, waiting to hold it alone
        self.drain_s = 0.0  # of that, through the turnstile, waiting for shared holds to end
        #                     (no new shared work starts meanwhile: the GPU may idle)
        self.exclusive_s = 0.0  # time held exclusively (a running total)
        self.yields = 0  # shared holds paused for a waiting writer (`let_writer_in`)
        self.held_up: dict[str, float] = {}  # shared steps that ended with a writer waiting:
        #                     their whole length, by the label of their end (`step_end`)
        self._step_t0 = 0.0

    def _open(self) -> tuple[int, int, int]:
        if self._fds is None:
            self._fds = tuple(os.open(p, os.O_RDWR | os.O_CREAT, 0o666) for p in self.paths)
        return self._fds

    @contextmanager
    def shared(self, label: str = "hold") -> Iterator[None]:
        if self.depth:
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        self._take_shared()
        self.depth = 1
        try:
            yield
        finally:
            self.depth = 0
            self.step_end(label)
            fcntl.flock(self._open()[1], fcntl.LOCK_UN)

    def _take_shared(self) -> None:
        """Once no writer is queued, through the turnstile (behind any writer that came since),
        then the lock shared."""
        gate, main, writers = self._open()
        t0 = time.perf_counter()
        fcntl.flock(writers, fcntl.LOCK_EX)  # every queued writer gone (they hold it shared)
        fcntl.flock(writers, fcntl.LOCK_UN)
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        self._step_t0 = time.perf_counter()
        self.wait_s += self._step_t0 - t0

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.depth:
            raise RuntimeError("GpuLock.exclusive inside a held lock")
        gate, main, writers = self._open()
        t0 = time.perf_counter()
        fcntl.flock(writers, fcntl.LOCK_SH)  # queued: no reader starts until every writer is done
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            tg = time.perf_counter()
            fcntl.flock(main, fcntl.LOCK_EX)
            t1 = time.perf_counter()
            self.drain_s += t1 - tg
            self.wait_s += t1 - t0
            self.wait_excl_s += t1 - t0
            self.depth = 1
            try:
                yield
            finally:
                self.exclusive_s += time.perf_counter() - t1
                self.depth = 0
                fcntl.flock(main, fcntl.LOCK_UN)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(writers, fcntl.LOCK_UN)

    def writer_waiting(self) -> bool:
        """Another evaluator waits to time (a queued writer holds the writers' file shared; a
        reader checking it holds it for an instant, so a false yes only costs one needless
        pause)."""
        writers = self._open()[2]
        try:
            fcntl.flock(writers, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(writers, fcntl.LOCK_UN)
        return False

    def step_end(self, label: str) -> bool:
        """At the end of a step of the outermost shared hold (the next starts now): whether a
        writer waits; if one does, the step's length is added to `held_up[label]` (it held the
        writer up for at most that long: profiling, which steps drain slowly)."""
        waiting, now = self.writer_waiting(), time.perf_counter()
        if waiting:
            self.held_up[label] = self.held_up.get(label, 0.0) + now - self._step_t0
        self._step_t0 = now
        return waiting

    def totals(self) -> dict[str, float]:
        """The running totals an evaluation's record takes its share of; `held_up` as `hu_*`."""
        return {"lock_wait": self.wait_s, "lock_wait_excl": self.wait_excl_s,
                "lock_drain": self.drain_s, "exclusive": self.exclusive_s,
                **{f"hu_{k}": v for k, v in self.held_up.items()}}

    def let_writer_in(self, label: str = "step") -> None:
        """Inside the outermost shared hold, with nothing of ours running on the GPU: where a
        writer waits, step out and queue behind it (a long shared hold, such as a case's seeds
        with their compiles, would otherwise idle the GPU while the writer waits for it)."""
        if self.depth != 1 or not self.step_end(label):
            return
        fcntl.flock(self._open()[1], fcntl.LOCK_UN)
        self._take_shared()
        self.yields += 1

    @contextmanager
    def released(self, label: str = "released") -> Iterator[None]:
        """Inside the outermost shared hold, with nothing of ours running on the GPU: the hold
        let go for the body (host work, such as a compile nothing waits on), then taken again
        behind any writer. Inside an inner hold the body runs holding it."""
        if self.depth != 1:
            yield
            return
        self.step_end(label)
        fcntl.flock(self._open()[1], fcntl.LOCK_UN)
        self.depth = 0
        try:
            yield
        finally:
            self._take_shared()
            self.depth = 1

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None


class NoLock:
    """The CPU path: the interpreter's timings are never taken, so nothing to exclude."""

    wait_s = exclusive_s = wait_excl_s = drain_s = 0.0
    yields = 0

    @contextmanager
    def shared(self, label: str = "hold") -> Iterator[None]:
        yield

    exclusive = shared

    def writer_waiting(self) -> bool:
        return False

    def step_end(self, label: str) -> bool:
        return self.writer_waiting()

    def let_writer_in(self, label: str = "step") -> None:
        pass

    @contextmanager
    def released(self, label: str = "released") -> Iterator[None]:
        yield

    def close(self) -> None:
        pass
