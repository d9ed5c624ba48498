"""The worker confines itself after exec (confine.py), says what it got, and has no network."""
from __future__ import annotations

import ctypes
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger
from kbx_ray.evaluate.parent.gpulock import GpuLock
from kbx_ray.evaluate.parent.sandbox import ConfinementError, Sandbox
from kbx_ray.evaluate.settings import SandboxConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

REPO = Path(__file__).resolve().parents[2]
RELU = get_task("activation/relu")

NET_PROBE = '''
import socket
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr):
    pass


def relu(x):
    names = sorted(n for _, n in socket.if_nameindex())
    devs = sorted(ln.split(":")[0].strip() for ln in open("/proc/net/dev").readlines()[2:])
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        reach = "connected"
    except OSError as e:
        reach = type(e).__name__
    try:
        socket.create_connection(("{outside}", 53), timeout=3).close()
        outside = "connected"
    except OSError as e:
        outside = type(e).__name__
    raise RuntimeError(f"probe: ifaces={{names}} dev={{devs}} parent={{reach}} outside={{outside}}")
'''


def test_the_report_reaches_the_parent_and_is_logged_once(caplog):
    from kbx_ray.evaluate.parent import sandbox as sandbox_mod

    sandbox_mod._CONFINEMENT_LOGGED.clear()  # once per process: earlier tests' workers logged
    cfg = SandboxConfig(cpu_seconds=600, file_mb=32, open_files=512)
    sbx, twin = Sandbox(cfg), Sandbox(cfg)
    try:
        with caplog.at_level(logging.INFO, logger="kbx_ray.evaluate.parent.sandbox"):
            sbx.request({"op": "hello"}, 120)
            rep, pid = sbx.confinement, sbx.proc.pid
            sbx.kill()
            sbx.request({"op": "hello"}, 120)  # a respawn with the same report: no second line
            twin.request({"op": "hello"}, 120)  # nor a second worker (the replay's) alike
        lines = [r.getMessage() for r in caplog.records if "confinement" in r.getMessage()]
        assert len(lines) == 1 and "setsid=True" in lines[0], lines
        assert rep["setsid"] is True and sbx.info["confinement"] == sbx.confinement
        assert rep["rlimits"]["RLIMIT_CPU"] == [600, 605]
        assert rep["rlimits"]["RLIMIT_FSIZE"] == [32 << 20] * 2
        assert rep["rlimits"]["RLIMIT_NOFILE"] == [512, 512]
        assert rep["rlimits"]["RLIMIT_CORE"] == [0, 0]
        assert rep["netns"] or rep["netns_refused"], rep["netns_why"]
        assert rep["landlock"] is (rep["landlock_abi"] > 0) is sbx.info["landlock"]
        assert rep["no_new_privs"] is rep["landlock"]
        limits = open(f"/proc/{sbx.proc.pid}/limits").read()
        assert pid != sbx.proc.pid and "Max open files            512" in limits
    finally:
        sbx.kill()
        twin.kill()


def test_the_worker_has_no_network_where_the_kernel_allows_it(static_off):
    """Landlock off (it refuses TCP on its own): the namespace alone keeps the candidate from a
    port the parent listens on, from the outside, and from every interface but loopback."""
    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=120,
                              sandbox=SandboxConfig(landlock="off")))
    server = socket.create_server(("127.0.0.1", 0))
    try:
        ev.sandbox.request({"op": "hello"}, 120)
        rep = ev.sandbox.confinement
        if rep.get("netns_refused"):
            pytest.skip(f"no network namespace on this kernel: {rep['netns_why']}")
        assert rep["netns"] is True and rep["landlock"] is False, rep
        code = NET_PROBE.format(port=server.getsockname()[1], outside="1.1.1.1")
        res = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
    finally:
        server.close()
        ev.close()
    assert res.error_kind == "runtime_error" and "probe:" in res.error_msg, res.error_msg
    probe = res.error_msg[res.error_msg.rindex("probe:"):]
    assert "ifaces=['lo']" in probe and "dev=['lo']" in probe, probe
    assert "parent=connected" not in probe and "outside=connected" not in probe, probe


LEDGER_PROBE = '''
import fcntl
import os
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr):
    pass


def relu(x):
    d, done = "{ledger}", []
    try:
        for name in sorted(os.listdir(d)):
            if not name.startswith("."):
                os.rename(os.path.join(d, name), os.path.join(d, name + ".ctx"))
                done.append("renamed")
    except OSError as e:
        done.append(type(e).__name__)
    try:  # the GPU lock held alone: every evaluator's timing would wait on it
        fcntl.flock(os.open("{lock}", os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)
        done.append("locked")
    except OSError as e:
        done.append("lock " + type(e).__name__)
    raise RuntimeError(f"probe: {{done}}")
'''


@pytest.mark.parametrize("landlock", ["auto", "off"])
def test_a_worker_cannot_touch_the_gpu_memory_ledger(static_off, landlock):
    """The per-GPU memory ledger lives under the system temp dir, where every evaluator's parent
    reads it. A worker that renamed another evaluator's reservation to a standing hold (`.ctx`)
    would make that evaluator's honest OOM its kernel's fault; one that held the GPU lock would
    stall every evaluator's timing. Landlock (`auto`: on every worker,
    GPU workers included) lets a worker write its own temp dir only; off, with the static layer and
    the monitor off too, the rename goes through, and the record is flagged `no_landlock`."""
    ledger = MemoryLedger(f"kbx-test-{os.getpid()}-{landlock}", 1 << 30)
    lock = GpuLock(f"kbx-test-{os.getpid()}-{landlock}")
    lock._open()  # its files, as an evaluator on that GPU leaves them
    ev = Evaluator(EvalConfig(device="cpu", monitor="off", case_timeout_s=60, load_timeout_s=120,
                              unseen_cases=0, sandbox=SandboxConfig(landlock=landlock)))
    try:
        with ledger.reserve(1 << 20):
            before = ledger.holdings()
            ev.sandbox.request({"op": "hello"}, 120)
            if landlock == "auto" and not ev.sandbox.confinement.get("landlock"):
                pytest.skip(f"no Landlock here: {ev.sandbox.confinement.get('landlock_why')}")
            code = LEDGER_PROBE.format(ledger=ledger.dir, lock=lock.paths[1])
            res = ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))
            after = ledger.holdings()
    finally:
        ev.close()
        shutil.rmtree(ledger.dir, ignore_errors=True)
        lock.close()
        for p in lock.paths:
            p.unlink(missing_ok=True)
    assert res.error_kind == "runtime_error" and "probe:" in res.error_msg, res.error_msg
    probe = res.error_msg[res.error_msg.rindex("probe:"):]
    if landlock == "auto":
        assert "PermissionError" in probe and after == before, (probe, after)
        assert "lock PermissionError" in probe, probe
        assert "no_landlock" not in res.flags, res.flags
    else:
        assert "renamed" in probe and [k.endswith(".ctx") for k in after] == [True], after
        assert "locked" in probe, probe
        assert "no_landlock" in res.flags, res.flags  # the record says its worker was bare


def test_network_true_keeps_the_host_network():
    sbx = Sandbox(SandboxConfig(network=True, landlock="off"))
    try:
        sbx.request({"op": "hello"}, 120)
        assert sbx.confinement["netns"] is False
        assert sbx.confinement["netns_why"] == "evaluation.sandbox.network=true"
        assert os.readlink(f"/proc/{sbx.proc.pid}/ns/net") == os.readlink("/proc/self/ns/net")
    finally:
        sbx.kill()


def _hide_landlock() -> None:
    """Make this process (and all it starts) see a kernel without Landlock: a seccomp filter
    answers its three system calls with ENOSYS, as an old kernel or a container's profile does."""
    ld, jeq, ret = 0x20, 0x15, 0x06
    prog = [(ld, 0, 0, 0), (jeq, 3, 0, 444), (jeq, 2, 0, 445), (jeq, 1, 0, 446),
            (ret, 0, 0, 0x7FFF0000), (ret, 0, 0, 0x00050000 | 38)]
    filt = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(filt, len(filt))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no-new-privs, required for an unprivileged filter
    assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, ctypes.get_errno()


def _child_without_landlock() -> None:
    """Run in a fresh interpreter: the worker of landlock=on on a kernel without Landlock."""
    _hide_landlock()
    sbx = Sandbox(SandboxConfig(landlock="on"))
    try:
        sbx.request({"op": "hello"}, 120)
        print("NO ERROR")
    except ConfinementError as e:
        print(f"ERROR {e}")
    finally:
        sbx.kill()


def test_landlock_on_without_landlock_is_refused_with_one_line():
    out = subprocess.run(
        [sys.executable, "-c", "from tests.integration.test_sandbox_confine import "
                               "_child_without_landlock as c; c()"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-800:]
    assert line.startswith("ERROR sandbox: evaluation.sandbox.landlock=on, but Landlock did not "
                           "take effect in the worker: this kernel has no Landlock"), line
    assert "\n" not in line and "landlock=off" in line
