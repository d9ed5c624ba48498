"""The sandbox worker confines itself, first thing after exec, and says what it got.
More: kbx_ray/evaluate/common/README.md, `confine.py`.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import struct
from dataclasses import asdict, dataclass
from typing import Any

from kbx_ray.evaluate.common import landlock

ENV = "KBX_CONFINE"
_NEWNET, _NEWUSER = 0x40000000, 0x10000000
# each limit and the evaluation.sandbox setting it comes from (the error names the setting)
SETTING = {"RLIMIT_CPU": "cpu_seconds", "RLIMIT_FSIZE": "file_mb", "RLIMIT_NOFILE": "open_files",
           "RLIMIT_CORE": "(always 0)", "RLIMIT_NPROC": "extra_procs", "RLIMIT_AS": "memory_gb"}


@dataclass(frozen=True)
class Spec:
    """What the parent asks of its worker, resolved from SandboxConfig (sandbox.confine_spec)."""
    cpu_seconds: int
    file_mb: int
    open_files: int
    nproc: int = 0              # RLIMIT_NPROC (0: left alone: /proc was unreadable)
    memory_bytes: int = 0       # RLIMIT_AS (0: off)
    network: bool = False       # True: keep the host's network
    landlock: bool = False      # confine files, TCP and signals with Landlock
    landlock_required: bool = False  # landlock=on: refuse a worker where it did not take
    device: str = "cpu"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def rlimits(self) -> dict[str, tuple[int, int]]:
        lim = {"RLIMIT_CPU": (self.cpu_seconds, self.cpu_seconds + 5),
               "RLIMIT_FSIZE": (self.file_mb << 20,) * 2, "RLIMIT_NOFILE": (self.open_files,) * 2,
               "RLIMIT_CORE": (0, 0)}
        if self.nproc:
            lim["RLIMIT_NPROC"] = (self.nproc,) * 2
        if self.memory_bytes:
            lim["RLIMIT_AS"] = (self.memory_bytes,) * 2
        return lim


def from_env() -> dict[str, Any]:
    """Confine this process as KBX_CONFINE says and return the report ({} without it)."""
    text = os.environ.pop(ENV, "")
    return apply(Spec(**json.loads(text))) if text else {}


def apply(spec: Spec) -> dict[str, Any]:
    """Limits, then the network namespace, then Landlock (which needs the paths as they are)."""
    report: dict[str, Any] = {"setsid": os.getsid(0) == os.getpid(), "rlimits": {}}
    for name, want in spec.rlimits().items():
        which = getattr(resource, name)
        try:
            resource.setrlimit(which, want)
            report["rlimits"][name] = list(resource.getrlimit(which))
        except (ValueError, OSError) as e:
            report["rlimits"][name] = f"{type(e).__name__}: {e}"
    if spec.network:
        report.update(netns=False, netns_why="evaluation.sandbox.network=true", userns=False)
    else:
        report.update(_unshare_network())
    if spec.landlock and spec.device == "cuda":
        # the one step left for later: worker.main calls `landlock_now` after torch.cuda.init(),
        # so the driver loads and opens its device nodes while all is visible (as validated)
        report.update(landlock=False, landlock_pending=True, landlock_why="pending CUDA init")
    else:
        landlock_now(report, spec.landlock, spec.device)
    return report


def landlock_now(report: dict[str, Any], wanted: bool, device: str) -> None:
    """Confine with Landlock (if `wanted`) and record what took in `report`. Landlock binds the
    calling thread and the threads it starts after: done before torch, it binds them all."""
    report["landlock_abi"] = landlock.abi_version()
    why = (landlock.confine_why(device) if wanted
           else "not asked (evaluation.sandbox.landlock=off)")
    report.update(landlock=not why, landlock_why=why, no_new_privs=_no_new_privs())
    report.pop("landlock_pending", None)


def _unshare_network() -> dict[str, Any]:
    """A fresh network namespace: loopback only, and down. As root the namespace alone; otherwise
    (or where root lacks CAP_SYS_ADMIN, as in a container) inside a new user namespace, whose
    capabilities are then dropped (as an exec after the unshare used to drop them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    tries = ([_NEWNET] if os.geteuid() == 0 else []) + [_NEWNET | _NEWUSER]
    for flags in tries:
        if libc.unshare(flags) == 0:
            break
    else:
        err = ctypes.get_errno()
        return {"netns": False, "userns": False, "netns_refused": True,
                "netns_why": f"the kernel refused unshare(CLONE_NEWNET|CLONE_NEWUSER): "
                             f"{errno.errorcode.get(err, err)} ({os.strerror(err)})"}
    userns = bool(flags & _NEWUSER)
    if userns and not _drop_capabilities(libc):
        return {"netns": False, "userns": True, "netns_refused": False,
                "netns_why": "capset failed after unshare: the worker held root in its namespace"}
    ifaces = interfaces()
    if ifaces != ["lo"]:
        return {"netns": False, "userns": userns, "netns_refused": False,
                "netns_why": f"interfaces {ifaces} after unshare, not only lo"}
    return {"netns": True, "userns": userns, "netns_refused": False, "netns_why": ""}


def _drop_capabilities(libc: ctypes.CDLL) -> bool:
    header = ctypes.create_string_buffer(struct.pack("Ii", 0x20080522, 0), 8)  # v3, this thread
    data = ctypes.create_string_buffer(24)  # effective, permitted, inheritable: all zero
    return libc.capset(header, data) == 0


def interfaces() -> list[str]:
    """The network interfaces this process's namespace has, from /proc/self/net/dev."""
    try:
        with open("/proc/self/net/dev") as f:
            return sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    except OSError:
        return []


def _no_new_privs() -> bool:
    try:
        with open("/proc/self/status") as f:
            return any(line.split() == ["NoNewPrivs:", "1"] for line in f)
    except OSError:
        return False


def unmet(spec: Spec, report: dict[str, Any]) -> str:
    """Why this worker must not run candidates ("" if it may): a limit its config sets that did
    not take; no network namespace where the kernel allowed one (its refusal is the documented
    fallback, INTEGRITY.md "Network"); Landlock missing under landlock=on, or refused by a kernel
    that has it."""
    if not report:
        return "the worker sent no confinement report (was it started by sandbox.spawn?)"
    if not report.get("setsid"):
        return "the worker is not in its own session (Popen start_new_session)"
    for name, want in spec.rlimits().items():
        got = report.get("rlimits", {}).get(name)
        if got != list(want):
            return (f"{name} (evaluation.sandbox.{SETTING[name]}) did not take effect in the "
                    f"worker: {got}, asked {list(want)}")
    if not spec.network and not report.get("netns") and not report.get("netns_refused"):
        return (f"evaluation.sandbox.network=false, but the worker has the host's network: "
                f"{report.get('netns_why')}")
    if spec.landlock and not report.get("landlock") and (
            spec.landlock_required or report.get("landlock_abi", 0) > 0):
        return (f"evaluation.sandbox.landlock={'on' if spec.landlock_required else 'auto'}, but "
                f"Landlock did not take effect in the worker: {report.get('landlock_why')}; set "
                "evaluation.sandbox.landlock=off to run without it")
    return ""


def summary(report: dict[str, Any]) -> str:
    """One log line: what the worker got."""
    lims = " ".join(f"{k[7:].lower()}={v[0] if isinstance(v, list) else 'FAILED'}"
                    for k, v in report.get("rlimits", {}).items())
    net = "netns" + (" (userns)" if report.get("userns") else "") if report.get("netns") else (
        f"no netns ({report.get('netns_why')})")
    ll = (f"landlock abi {report.get('landlock_abi')}" if report.get("landlock")
          else f"no landlock ({report.get('landlock_why')})")
    return (f"setsid={report.get('setsid')} {lims}; {net}; {ll}; "
            f"no_new_privs={report.get('no_new_privs')}")
