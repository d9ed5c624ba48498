"""GPU memory admission: a ledger of device-memory reservations shared by every evaluator process
on one GPU (a sibling of gpulock.py). Standard library only.
More: kbx_ray/evaluate/parent/README.md, `gpu_memory.py`.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

_SEQ = itertools.count()
_ALONE = ".alone"  # suffix of a reservation that wants the whole device (the OOM retry)
_STANDING = ".ctx"  # suffix of a process group's lifetime hold: its CUDA contexts, idle or not


def estimate_bytes(case_bytes: int, flush_bytes: int, factor: float = 6.0, margin: float = 0.25,
                   floor: int = 1 << 28) -> int:
    """Peak device memory of one evaluation: its largest case's inputs and outputs (its footprint,
    kbx_ray/cases/footprint.py) times `factor` (the parent's pristine inputs, their copy, the
    reference's and the candidate's outputs; the worker's inputs, copy, outputs and the rotated
    timing sets), the timing flush buffer, `margin` of that, and `floor` for the allocator's
    rounding. The processes' CUDA contexts are not in it: each evaluator holds them standing
    (MemoryLedger.standing)."""
    base = factor * max(int(case_bytes), 0) + max(int(flush_bytes), 0)
    return int(base * (1 + margin)) + floor


def budget_bytes(total: int, reserve: int = 4 << 30) -> int:
    """The per-GPU budget: the device's total memory (torch.cuda.mem_get_info()[1]) minus a
    reserve for contexts and fragmentation."""
    return max(int(total) - int(reserve), 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MemoryLedger:
    """One GPU's reservations, in the directory `<root>/kbx_gpumem_<key>` (key: the device UUID).
    `free`, if given, reads the device's free bytes now: beside other holders a reservation also
    waits until the device really has that much free (memory no ledger counts: contexts, caches,
    other programs; on the H100 such memory ran 8 jobs out of memory with the ledger in bounds)."""

    def __init__(self, key: str, budget: int, root: str | None = None,
                 free: Callable[[], int] | None = None) -> None:
        base = Path(root or tempfile.gettempdir())
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)[:80]
        self.dir = base / f"kbx_gpumem_{safe}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lock_path = self.dir / ".lock"
        self.count_path = self.dir / ".admitted"  # admissions so far, every process together
        self.budget = int(budget)
        self.free = free
        self.wait_s = 0.0
        self.free_wait_s = 0.0  # of it, polls where the ledger had room but the device did not
        self._mark = 0  # the admission count just after this process's latest admission
        self._crowded = False  # another process held a reservation at that admission
        self._short = False  # the latest poll found the ledger's room but not the device's

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def _evaluation(name: str) -> bool:
        """An evaluation's reservation, not a standing hold."""
        return not name.endswith(_STANDING)

    def holdings(self) -> dict[str, tuple[int, int]]:
        """name -> (pid, bytes) of the live reservations (a dead process's file is removed)."""
        out = {}
        for p in self.dir.iterdir():
            if p.name.startswith("."):
                continue
            try:
                pid = int(p.name.split(".")[0])
                n = int(p.read_text() or 0)
            except (ValueError, OSError):
                continue
            if _alive(pid):
                out[p.name] = (pid, n)
            else:
                p.unlink(missing_ok=True)
        return out

    def _admitted(self) -> int:
        try:
            return int(self.count_path.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def _others(self, held: dict[str, tuple[int, int]], pid: int) -> bool:
        """Does another process's evaluation hold memory (standing holds do not count)?"""
        return any(p != pid and n > 0 for k, (p, n) in held.items() if self._evaluation(k))

    def others_hold(self, pid: int | None = None) -> bool:
        pid = os.getpid() if pid is None else pid
        with self._locked():
            return self._others(self.holdings(), pid)

    def shared_since_admission(self) -> bool:
        """Did another process's evaluation hold memory while this one's latest reservation ran:
        at its admission, now, or admitted in between (one that came and went counts too)? Other
        evaluators' idle contexts (their standing holds) do not: they were counted, not shared."""
        with self._locked():
            now = self._others(self.holdings(), os.getpid())
            return self._crowded or now or self._admitted() > self._mark

    def standing(self, nbytes: int) -> str:
        """Hold `nbytes` for this process's life (or until `unstand`): memory its process group
        keeps whether or not it evaluates, its CUDA contexts. It counts against the budget, never
        as another evaluation (an OOM beside only standing holds is not shared, and the OOM retry
        alone does not wait for them). A dead process's hold is removed like any other."""
        name = f"{os.getpid()}.{next(_SEQ)}{_STANDING}"
        with self._locked():
            (self.dir / name).write_text(str(max(int(nbytes), 0)))
        return name

    def unstand(self, name: str) -> None:
        with self._locked():
            (self.dir / name).unlink(missing_ok=True)

    def _admit(self, name: str, want: int, alone: bool) -> bool:
        """Under the lock: write this reservation if it may run now. `alone` claims the whole
        budget at once (no one else is admitted from then on: a turnstile, so a stream of small
        evaluations cannot starve it) and runs once every other holder has left."""
        held = self.holdings()
        others = {k: v for k, v in held.items() if k != name}
        running = any(self._evaluation(k) for k in others)  # another evaluation holds memory
        if alone:
            if name not in held:
                if any(k.endswith(_ALONE) for k in others):
                    return False  # another retry has the device: wait for it to finish
                (self.dir / name).write_text(str(self.budget))
            return not running
        if running and sum(n for _, n in others.values()) + want > self.budget:
            return False
        if running and self.free is not None and self.free() < want:
            self._short = True
            return False  # alone it is admitted anyway: its retry is the floor
        (self.dir / name).write_text(str(want))
        return True

    @contextmanager
    def reserve(self, nbytes: int, poll_s: float = 0.05, alone: bool = False) -> Iterator[None]:
        """Hold `nbytes` (capped at the budget, so one evaluation can always run alone) while the
        body runs; wait while the others' reservations leave too little (`alone`: hold the whole
        budget, once no other process holds any, for the retry of an out-of-memory error). One
        that fits only alone, beside the standing holds, claims the device so too: waiting for a
        moment when no evaluation runs, a stream of small ones could starve it."""
        want = min(int(nbytes), self.budget)
        with self._locked():
            standing = sum(n for k, (_, n) in self.holdings().items() if not self._evaluation(k))
        alone = alone or standing + want > self.budget
        name = f"{os.getpid()}.{next(_SEQ)}" + (_ALONE if alone else "")
        t0 = time.perf_counter()
        try:
            while True:
                tp, self._short = time.perf_counter(), False
                with self._locked():
                    if self._admit(name, want, alone):
                        crowded = self._others({k: v for k, v in self.holdings().items()
                                                if k != name}, os.getpid())
                        self._mark = self._admitted() + 1
                        self.count_path.write_text(str(self._mark))
                        self._crowded = crowded
                        break
                time.sleep(poll_s)
                if self._short:
                    self.free_wait_s += time.perf_counter() - tp
            self.wait_s += time.perf_counter() - t0
            yield
        finally:
            with self._locked():
                (self.dir / name).unlink(missing_ok=True)
