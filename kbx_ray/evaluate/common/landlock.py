"""Landlock: the worker confines its own files, TCP and signal reach before it runs a candidate.
More: kbx_ray/evaluate/common/README.md, `landlock.py`.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446   # same numbers on x86_64 and aarch64
_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE
_TRUNCATE = 1 << 14
_NET_BIND, _NET_CONNECT = 1, 2
_SCOPE_UNIX, _SCOPE_SIGNAL = 1, 2


def abi_version() -> int:
    """The kernel's Landlock ABI (0: unavailable)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        return max(0, int(libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))))
    except (OSError, AttributeError):
        return 0


def restrict(read: list[str], write: list[str]) -> bool:
    """Allow reading under `read` and reading and writing under `write`; deny the rest. Missing
    paths are skipped. Returns False when Landlock is unavailable (nothing was changed)."""
    return not restrict_why(read, write)


def restrict_why(read: list[str], write: list[str]) -> str:
    """`restrict`, saying why not: "" when the process is now confined, else the reason."""
    abi = abi_version()
    if abi < 1:
        return "this kernel has no Landlock (it needs Linux >= 5.13 with landlock in lsm=)"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    handled = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    net = _NET_BIND | _NET_CONNECT if abi >= 4 else 0
    scoped = _SCOPE_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        return _errno_line("landlock_create_ruleset")
    try:
        for paths, rights in ((read, _EXECUTE | _READ_FILE | _READ_DIR), (write, handled)):
            for path in dict.fromkeys(p for p in paths if p and p != "/" and os.path.exists(p)):
                _allow(libc, fd, path, rights)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required to restrict oneself
            return _errno_line("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return _errno_line("landlock_restrict_self")
        return ""
    finally:
        os.close(fd)


def _errno_line(call: str) -> str:
    err = ctypes.get_errno()
    return f"{call} failed: {errno.errorcode.get(err, err)} ({os.strerror(err)})"


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS | _TRUNCATE
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, pfd), 12)
        libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH), rule,
                     ctypes.c_uint32(0))
    finally:
        os.close(pfd)


def worker_paths(pkg_dir: str, home: str, cache: str,
                 device: str = "cpu") -> tuple[list[str], list[str]]:
    """What a worker reads and writes: the interpreter, site-packages and this package, shared
    libraries, its own /proc entry and a few system files; its home, where its Triton cache
    lies. A `cache` outside the home is not writable: it would outlive the worker, and the next
    worker would read what a candidate planted there (the parent removes the home). A GPU
    worker also reads /sys and the driver's /proc files and opens the NVIDIA device nodes (its
    compiler runs ptxas and cc from site-packages and /usr, which reading covers: execute is
    granted with read)."""
    import glob
    import sys

    repo = os.path.dirname(pkg_dir)
    read = [sys.prefix, sys.base_prefix, sys.exec_prefix, pkg_dir, "/usr", "/lib", "/lib64",
            "/etc/ld.so.cache", "/dev/urandom", "/dev/zero", "/sys/devices/system/cpu",
            "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", os.path.realpath("/proc/self")]
    read += [p for p in sys.path if os.path.isdir(p) and not _under(p, repo) and p != "/"]
    write = [home, "/dev/null"] + ([cache] if cache and _under(cache, home) else [])
    if device == "cuda":
        read += ["/sys", "/proc/driver", "/opt", "/etc/alternatives"]
        write += glob.glob("/dev/nvidia*")
    return read, write


def confine(device: str) -> bool:
    """Confine this worker process (the sandbox worker, the AOT compile worker) to `worker_paths`
    when its parent asked for it (KBX_LANDLOCK=1); True if Landlock took."""
    return os.environ.get("KBX_LANDLOCK") == "1" and not confine_why(device)


def confine_why(device: str) -> str:
    """`confine` unconditionally, saying why not: "" when Landlock took, else the reason."""
    pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # kbx_ray/
    return restrict_why(*worker_paths(pkg, os.getcwd(), os.environ.get("TRITON_CACHE_DIR", ""),
                                      device))


def _under(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)
