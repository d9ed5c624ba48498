"""GPU memory admission: a ledger of device-memory reservations shared by every evaluator process
on one GPU (a sibling of gpulock.py; issue 27 item 7). Standard library only.

Each evaluation reserves its estimated peak device memory (`estimate_bytes`: inputs, reference
outputs and candidate outputs of its largest case, the timing flush buffer and a margin) against a
per-GPU budget (`budget_bytes`: the device's total memory minus a reserve), and waits while the
reservations of the others leave too little. Reservations are files `<pid>.<n>` holding a byte
count in one directory per GPU, updated under an `flock`; the file of a process that died is
ignored (its pid is gone), so a killed evaluator never holds memory in the ledger.

`others_hold(pid)` says whether another live process holds a reservation: an out-of-memory error
while it does is the platform's (`infra_error`, retried alone), one while alone is the candidate's.

Not yet wired (H5, Dec 2): the evaluator's reservation around `evaluate`, the OOM retry alone, and
suite_gpu.py --jobs 8. See the module's test, tests/unit/test_gpu_memory.py.
"""
from __future__ import annotations

import fcntl
import itertools
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_SEQ = itertools.count()


def estimate_bytes(case_bytes: int, flush_bytes: int, margin: float = 0.25,
                   floor: int = 256 << 20) -> int:
    """Peak device memory of one evaluation: its largest case's inputs and outputs (`cost()`'s
    bytes) three times (inputs + reference outputs + candidate outputs, rounded up), the timing
    flush buffer, and `margin` of that plus `floor` for the CUDA context and the allocator."""
    base = 3 * max(int(case_bytes), 0) + max(int(flush_bytes), 0)
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
    def __init__(self, key: str, budget: int, root: str | None = None) -> None:
        base = Path(root or tempfile.gettempdir())
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)[:80]
        self.dir = base / f"kbx_gpumem_{safe}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lock_path = self.dir / ".lock"
        self.budget = int(budget)
        self.wait_s = 0.0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

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

    def others_hold(self, pid: int | None = None) -> bool:
        pid = os.getpid() if pid is None else pid
        with self._locked():
            return any(p != pid and n > 0 for p, n in self.holdings().values())

    @contextmanager
    def reserve(self, nbytes: int, poll_s: float = 0.05, alone: bool = False) -> Iterator[None]:
        """Hold `nbytes` (capped at the budget, so one evaluation can always run alone) while the
        body runs; wait while the others' reservations leave too little (`alone`: until no other
        process holds any, for the retry of an out-of-memory error)."""
        want = min(int(nbytes), self.budget)
        name = f"{os.getpid()}.{next(_SEQ)}"
        t0 = time.perf_counter()
        while True:
            with self._locked():
                held = self.holdings()
                used = sum(n for _, n in held.values())
                if (not held if alone else used + want <= self.budget or not held):
                    (self.dir / name).write_text(str(want))
                    break
            time.sleep(poll_s)
        self.wait_s += time.perf_counter() - t0
        try:
            yield
        finally:
            with self._locked():
                (self.dir / name).unlink(missing_ok=True)
