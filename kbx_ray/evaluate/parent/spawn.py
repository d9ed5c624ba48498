"""A sandbox worker started confined: its scrubbed environment, the confinement it applies to
itself first thing after exec (`common/confine.py`), its own session, and the most bytes one of its
replies may carry. Popen's own options only, never `preexec_fn` (unsafe in a threaded Ray actor).
Used by `sandbox.py` (the judging and replay workers) and `aot.py` (the compile worker).
"""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

from kbx_ray.evaluate.common import confine
from kbx_ray.evaluate.parent.redaction import SECRET as _SECRET
from kbx_ray.evaluate.parent.triton_cache import worker_cache
from kbx_ray.evaluate.settings import SandboxConfig

log = logging.getLogger(__name__)

_PKG_ROOT = str(Path(__file__).resolve().parents[3])  # the repository: kbx_ray/evaluate/parent/..
_ENV_ALLOW = re.compile(r"^(PATH|LANG|LC_ALL|LC_CTYPE|LD_LIBRARY_PATH|CUDA_VISIBLE_DEVICES|CUDA_HOME|"
                        r"CUDA_PATH|NVIDIA_[A-Z_]+|TRITON_[A-Z_]+|OMP_NUM_THREADS|VIRTUAL_ENV)$")
_WARNED: set[str] = set()


def reply_cap_bytes(max_output_mb: int = 0) -> int:
    """The most bytes one reply may carry. A fixed cap failed correct kernels on real suites
    (KernelBench's 19_ReLU returns 6 GiB), so the default follows the parent's memory: half of what
    is available now, never under 2 GiB. The cap exists so a worker cannot make the parent allocate
    more than it has; a number set in the config wins."""
    if max_output_mb > 0:
        return max_output_mb << 20
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return max(2 << 30, avail // 2)


def scrubbed_env(cfg: SandboxConfig, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if _ENV_ALLOW.match(k) and not _SECRET.search(k)}
    env.update(cfg.extra_env)
    env.update(HOME=home, TMPDIR=home, PYTHONPATH=_PKG_ROOT, PYTHONDONTWRITEBYTECODE="1",
               KBX_DEVICE=cfg.device, PYTHONUNBUFFERED="1",
               # glibc fills fresh allocations with 0x7f and freed ones with 0x80: an uninitialised
               # `torch.empty` on the CPU reads as garbage, never as a stale correct answer
               MALLOC_PERTURB_="128",
               KBX_LANDLOCK="1" if _landlock_on(cfg) else "0")
    # the worker's own Triton cache, removed with its temp dir: nothing a candidate writes there
    # outlives the worker or reaches another one (a TRITON_CACHE_DIR set anywhere is not used)
    if "TRITON_CACHE_DIR" in cfg.extra_env and "cache" not in _WARNED:
        _WARNED.add("cache")
        log.warning("evaluation.sandbox.extra_env.TRITON_CACHE_DIR is not used: each worker has "
                    "its own Triton cache, removed with it (ahead-of-time kernels are copied in)")
    env["TRITON_CACHE_DIR"] = worker_cache(home)
    return {k: v for k, v in env.items() if not _SECRET.search(k) or k == "TRITON_CACHE_DIR"}


def confine_spec(cfg: SandboxConfig) -> confine.Spec:
    """What the worker must do to itself first thing after exec (confine.py): every limit here
    used to be set between fork and exec, which a threaded parent (a Ray actor) cannot do safely."""
    nproc_now = len([p for p in os.listdir("/proc") if p.isdigit()]) if os.path.isdir("/proc") else 0
    return confine.Spec(
        cpu_seconds=cfg.cpu_seconds, file_mb=cfg.file_mb, open_files=cfg.open_files,
        nproc=nproc_now + cfg.extra_procs if nproc_now else 0,
        memory_bytes=int(cfg.memory_gb * (1 << 30)) if cfg.memory_gb and cfg.device == "cpu" else 0,
        network=cfg.network, landlock=_landlock_on(cfg), landlock_required=cfg.landlock == "on",
        device=cfg.device)


def _landlock_on(cfg: SandboxConfig) -> bool:
    """On unless `off`, on GPU workers too (validated by tests/gpu/test_exploits_gpu.py's
    confined-worker tests): without it a GPU worker could write the per-GPU memory ledger."""
    return cfg.landlock != "off"


def spawn(argv: list[str], spec: confine.Spec, home: str, env: dict[str, str],
          **popen: Any) -> subprocess.Popen:
    """Start a worker with Popen's own safe options, never `preexec_fn`: its own session (so
    `kill_group` reaches all it starts), no inherited descriptors but `pass_fds`, `home` as cwd,
    `env` plus `spec`, the confinement it applies to itself (confine.py)."""
    env = dict(env, **{confine.ENV: spec.to_json()})
    return subprocess.Popen(argv, cwd=home, env=env, start_new_session=True, close_fds=True,
                            **popen)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole session (`spawn` started it in its own) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
