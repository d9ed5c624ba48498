"""The parent side of the sandbox: a warm worker subprocess, its limits, timeouts and respawns.
More: kbx_ray/evaluate/parent/README.md, `sandbox.py`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from kbx_ray.evaluate import protocol
from kbx_ray.evaluate.common import confine
from kbx_ray.evaluate.parent.home_files import write_fresh
from kbx_ray.evaluate.parent.redaction import redact, scrub_paths  # noqa: F401
from kbx_ray.evaluate.parent.spawn import (confine_spec, kill_group, reply_cap_bytes,
                                          scrubbed_env, spawn)
from kbx_ray.evaluate.parent.triton_cache import checked_name, seed_cache, worker_cache
from kbx_ray.evaluate.settings import SandboxConfig
from kbx_ray.types import ErrorKind

log = logging.getLogger(__name__)

_CONFINEMENT_LOGGED: list[dict[str, Any]] = []  # per process: the judging and the replay worker alike


@dataclass
class Flight:
    """A request sent and not yet answered (`Sandbox.send`)."""
    proc: subprocess.Popen
    deadline: float  # time.monotonic()
    timeout: float
    watchdog: threading.Timer
    expired: threading.Event
    late: WorkerDied


class WorkerDied(RuntimeError):
    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind, self.msg = kind, msg


class ConfinementError(RuntimeError):
    """The worker lacks a confinement its config demands: one line naming the setting."""



class Sandbox:
    """One warm worker. `request` sends an op and returns its reply, or raises WorkerDied."""

    def __init__(self, cfg: SandboxConfig, stateful: bool = False) -> None:
        self.cfg = cfg
        self.stateful = stateful  # the judging worker: its ops need `loaded`
        self.proc: subprocess.Popen | None = None
        self.loaded: subprocess.Popen | None = None  # the process the last `load` went to
        self.home, self.info = "", {}
        self.log: Any = None  # the worker's log, held open (`_spawn`)
        self.confinement: dict[str, Any] = {}  # what the worker got (confine.apply's report)
        self.spawns = 0
        self.inflight: Flight | None = None  # a request sent and not yet answered
        self.triton_files: dict[str, bytes] = {}  # the candidate's ahead-of-time kernels

    def seed_triton(self, files: dict[str, bytes]) -> int:
        """The next candidate's ahead-of-time kernels (aot.py): copied into the running worker's
        own Triton cache now, and into any worker started for it later (a respawn); how many
        files were written now."""
        self.triton_files = {checked_name(rel): data for rel, data in files.items()}
        return seed_cache(files, worker_cache(self.home)) if self.alive and self.home else 0

    def _spawn(self) -> None:
        # read once per worker, not per request: /proc/meminfo on every round trip is a hot path
        self.reply_cap = reply_cap_bytes(self.cfg.max_output_mb)
        self.home = tempfile.mkdtemp(prefix="kbx_sbx_")
        r_fd, w_fd = os.pipe()
        protocol.widen_pipe(r_fd)  # replies carry outputs of up to GBs
        # read, sized and trimmed through this descriptor, never by its path, which the candidate
        # can replace (a link would turn the trim or the tail onto a file of the parent's)
        self.log = open(os.path.join(self.home, "worker.log"), "a+b")  # appended: `receive` trims
        try:
            seed_cache(self.triton_files, worker_cache(self.home))
        except (OSError, ValueError) as e:  # a full disk: the worker compiles as usual
            log.warning("ahead-of-time kernels not seeded (%s: %s)", type(e).__name__, e)
        spec = confine_spec(self.cfg)
        self.proc = spawn([sys.executable, "-m", "kbx_ray.evaluate.worker.main", str(w_fd)], spec,
                          self.home, scrubbed_env(self.cfg, self.home), stdin=subprocess.PIPE,
                          stdout=self.log, stderr=self.log, pass_fds=(w_fd,))
        os.close(w_fd)
        self.reply = os.fdopen(r_fd, "rb", buffering=0)
        self.spawns += 1
        self.info, _ = self._receive(self._send({"op": "hello"}, 120.0))
        self._check_confinement(spec, self.info.get("confinement") or {})

    def _check_confinement(self, spec: confine.Spec, report: dict[str, Any]) -> None:
        """Keep and log (once, or when it changes) what the worker got; refuse a worker that
        lacks what the config demands: no candidate ever reaches it."""
        self.confinement = report
        seen = dict(report, rlimits=sorted(report.get("rlimits", {})))  # NPROC's value varies
        if seen not in _CONFINEMENT_LOGGED:
            log.info("sandbox worker confinement: %s", confine.summary(report))
            _CONFINEMENT_LOGGED[:] = [seen]
        why = confine.unmet(spec, report)
        if why:
            self.kill()
            raise ConfinementError(f"sandbox: {why}")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def bare(self) -> bool:
        """Running without Landlock (`landlock=off`, or a kernel without it)."""
        return self.alive and not self.confinement.get("landlock")

    def start(self) -> None:
        """A running worker: started afresh unless one is up (first use, or after a kill)."""
        if not self.alive:
            self.kill()
            self._spawn()

    def request(self, header: dict, timeout: float) -> tuple[dict, list[bytearray]]:
        return self.receive(self.send(header, timeout))

    def send(self, header: dict, timeout: float) -> Flight:
        """A request on its way: its reply is read by `receive`, all of it within `timeout` of
        now (the caller works meanwhile; one request in flight at a time)."""
        if self.inflight is not None:  # an abandoned request's reply would answer this one
            self.kill()
        op = header.get("op")
        if self.stateful and op not in ("hello", "load", "release"):  # never a fresh worker
            if self.proc is None or self.proc is not self.loaded:   # without the candidate
                raise WorkerDied(ErrorKind.INFRA_ERROR, f"this process stopped the worker before "
                                 f"the {op} request: not the candidate's doing; re-run it")
            if not self.alive:
                raise self._died(f"it exited before the {op} request")
        self.start()
        self.loaded = self.proc if op == "load" else self.loaded
        if header.get("task_path"):
            header = dict(header, task_path=self._private_copy(header["task_path"]))
        self.inflight = self._send(header, timeout)
        return self.inflight

    def receive(self, flight: Flight) -> tuple[dict, list[bytearray]]:
        self.inflight = None
        reply = self._receive(flight)
        if self._log_bytes() > (self.cfg.file_mb << 20) // 2:  # before a print fails (EFBIG)
            os.ftruncate(self.log.fileno(), 0)  # never a kill mid-evaluation
        return reply

    def _log_bytes(self) -> int:
        return os.fstat(self.log.fileno()).st_size if self.log else 0

    def _private_copy(self, path: str) -> str:
        """The task file, copied into the worker's temp dir: the repository path stays unknown."""
        with open(path, "rb") as f:
            data = f.read()
        import hashlib

        dest = os.path.join(self.home, f"kbx_task_{hashlib.sha256(data).hexdigest()[:16]}.py")
        write_fresh(dest, data)  # each time: an earlier candidate can have left its own there
        return dest

    def _send(self, header: dict, timeout: float) -> Flight:
        """Send one request; a watchdog kills the worker's group at the deadline, so a reply that
        starts and then stalls (or a request the worker never reads) ends too."""
        assert self.proc and self.proc.stdin
        proc, expired = self.proc, threading.Event()

        def expire() -> None:
            expired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        late = WorkerDied(ErrorKind.TIMEOUT,
                          f"{header.get('op')} ran past its {timeout:.0f} s limit")
        watchdog = threading.Timer(max(timeout, 0.0) + 0.5, expire)
        watchdog.daemon = True
        watchdog.start()
        flight = Flight(proc, time.monotonic() + max(timeout, 0.0), timeout, watchdog, expired, late)
        try:
            protocol.send(self.proc.stdin, header)
        except (BrokenPipeError, OSError):
            watchdog.cancel()
            if expired.is_set():
                self.kill()
                raise late from None
            raise self._died("the worker was gone before the request") from None
        return flight

    def _receive(self, flight: Flight) -> tuple[dict, list[bytearray]]:
        """The reply to `flight`, within its deadline, scrubbed and with a CUDA fault confirmed."""
        try:
            if self.proc is not flight.proc:
                raise WorkerDied(ErrorKind.CRASH,
                                 "the worker was killed while a request was in flight")
            ready, _, _ = select.select([self.reply], [], [],
                                        max(flight.deadline - time.monotonic(), 0.0))
            if not ready:
                self.kill()
                raise flight.late
            try:
                reply, blobs = protocol.recv(self.reply, self.reply_cap)
            except protocol.ProtocolError as e:
                if flight.expired.is_set():
                    self.kill()
                    raise flight.late from None
                raise self._died(str(e)) from None
        finally:
            flight.watchdog.cancel()
        reply = redact(reply)
        if isinstance(reply.get("error_msg"), str):
            reply["error_msg"] = scrub_paths(reply["error_msg"])
        if not reply.get("ok") and (reply.get("cuda_suspect")
                                    or reply.get("error_kind") == ErrorKind.CUDA_ERROR):
            reply["error_kind"] = self._confirm_cuda(reply.get("error_kind"), flight.timeout)
        if reply.get("error_kind") == ErrorKind.CUDA_ERROR or reply.get("fatal"):
            self.kill()
        return reply, blobs

    def _confirm_cuda(self, kind: Any, timeout: float) -> str:
        """A failure whose text looks like a CUDA fault is `cuda_error` only if this worker's
        CUDA context is really broken: a tiny op and a synchronize in the same process fail, or
        the process is dead. Otherwise the worker's own kind stands (`runtime_error`: a
        candidate that raises "CUDA error: ..." itself, INTEGRITY.md class 7); a worker that
        claimed `cuda_error` itself is not believed either."""
        if not self.alive:
            return ErrorKind.CUDA_ERROR
        try:
            probe, _ = self._receive(self._send({"op": "probe"}, min(max(timeout, 5), 60)))
        except WorkerDied:
            return ErrorKind.CUDA_ERROR
        if not probe.get("ok") or probe.get("value") != 12.0:
            return ErrorKind.CUDA_ERROR
        believed = (ErrorKind.RUNTIME_ERROR, ErrorKind.DISQUALIFIED,
                    ErrorKind.UNSUPPORTED_INTERPRETER)
        return kind if kind in believed else ErrorKind.RUNTIME_ERROR

    def _died(self, why: str) -> WorkerDied:
        """Turn a dead worker into a crash record with the tail of its log and its exit cause."""
        assert self.proc
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.log_tail()
        self.kill()
        cause = f"exit code {code}"
        if code is not None and code < 0:
            cause = f"killed by {signal.Signals(-code).name}"
        return WorkerDied(ErrorKind.CRASH, redact(f"worker died ({cause}; {why}). {tail}".strip()))

    def log_tail(self, n: int = 1500) -> str:
        if self.log is None:
            return ""
        size = os.fstat(self.log.fileno()).st_size
        return os.pread(self.log.fileno(), n, max(0, size - n)).decode(errors="replace")

    def write_code(self, name: str, code: str) -> str:
        self.start()
        path = os.path.join(self.home, f"{name}.py")
        write_fresh(path, code.encode())
        return path

    def kill(self) -> None:
        if self.inflight is not None:
            self.inflight.watchdog.cancel()
            self.inflight = None
        if self.proc is not None:
            kill_group(self.proc)
            self.reply.close()
            with contextlib.suppress(OSError, AttributeError):
                self.proc.stdin.close()
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = ""

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.kill()
        except Exception:  # noqa: BLE001
            pass
