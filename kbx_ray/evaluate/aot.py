"""Ahead-of-time Triton compiles on CPU nodes, and seeding a GPU worker's cache with them (issue 6).

`compile_candidate` runs `aot_worker.py` on the candidate in a sandboxed child (its own session,
resource limits, a scrubbed environment, a temp dir as HOME and cwd, no network, Landlock) with a
fresh `TRITON_CACHE_DIR`, and returns the files Triton wrote there: the kernels compiled for the
target architecture (sm_XX) under the keys a GPU worker with the same Triton looks up. The engine's
compile pool (`kbx_ray/compile_pool.py`) calls it on `compile`-resource nodes while the GPUs are busy
with other candidates; the evaluator writes the files into its worker's cache (`seed_cache`) before
the candidate arrives. A cache entry is only ever a hit for the exact key Triton computes on the GPU,
so a wrong guess costs nothing but the compile the GPU would have done anyway.
"""
from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbx_ray.evaluate.checks import static_check
from kbx_ray.evaluate.sandbox import SandboxConfig, _limits, redact, scrubbed_env
from kbx_ray.types import Candidate, Task

MAX_FILES_MB = 64  # what one candidate's compiles may bring back
_ENTRY = re.compile(r"^[A-Za-z0-9_\-]{8,128}/[A-Za-z0-9_.\-]{1,200}$")  # <key>/<file>, nothing else


@dataclass
class AotResult:
    arch: int
    files: dict[str, bytes] = field(default_factory=dict)  # cache-relative path -> content
    cases: dict[str, str] = field(default_factory=dict)    # case -> "ok" or why it was not traced
    wall_s: float = 0.0
    error: str = ""
    triton: str = ""  # the compiler's version: keys from another version never match

    @property
    def kernels(self) -> int:
        return sum(1 for p in self.files if p.endswith(".cubin"))

    def summary(self) -> dict[str, Any]:
        traced = sum(v == "ok" for v in self.cases.values())
        return {"arch": self.arch, "kernels": self.kernels, "traced": traced,
                "cases": len(self.cases), "wall_s": round(self.wall_s, 3), "error": self.error}


def compile_candidate(task: Task, cand: Candidate, arch: int, timeout_s: float = 300.0,
                      cfg: SandboxConfig | None = None, real_inputs_mb: float = 512) -> AotResult:
    """Compile the candidate's kernels for sm_`arch` on this (CPU) machine, in the sandbox. A
    case that fake tensors cannot trace is retried on real CPU inputs up to `real_inputs_mb`."""
    cfg = cfg or SandboxConfig(device="cpu")
    res = AotResult(arch=arch)
    t0 = time.perf_counter()
    refused = _refused(task, cand)
    if refused:  # what the evaluator will reject never runs here either (nor writes any file)
        res.error = refused
        return res
    with tempfile.TemporaryDirectory(prefix="kbx_aot_") as home:
        cache = Path(home) / "triton_cache"
        cache.mkdir()
        (Path(home) / "task.py").write_bytes(Path(task.path).read_bytes())
        (Path(home) / "candidate.py").write_text(cand.code or "")
        env = scrubbed_env(cfg, home)
        env.pop("TRITON_INTERPRET", None)
        env.update(TRITON_CACHE_DIR=str(cache), KBX_DEVICE="aot")
        req = {"arch": arch, "task_path": "task.py", "candidate_path": "candidate.py",
               "entry": cand.entry or task.name, "cases": list(task.cases),
               "real_inputs_mb": real_inputs_mb}
        proc = subprocess.Popen([sys.executable, "-m", "kbx_ray.evaluate.aot_worker"], cwd=home,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, preexec_fn=_limits(cfg))
        try:
            out, _ = proc.communicate(json.dumps(req).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            res.error = f"ahead-of-time compile timed out after {timeout_s:g} s"
            out = b""
        finally:
            _kill_group(proc)
        if out and not res.error:
            try:
                reply = json.loads(out.decode(errors="replace"))
                res.cases, res.error = dict(reply.get("cases", {})), str(reply.get("error", ""))
                res.triton = str(reply.get("triton", ""))
            except (ValueError, AttributeError):
                res.error = f"the compile worker's reply was not JSON ({len(out)} bytes)"
        elif not res.error:
            res.error = f"the compile worker exited with status {proc.returncode} and no reply"
        res.files = _collect(cache)
    res.error = redact(res.error)
    res.wall_s = time.perf_counter() - t0
    return res


def _refused(task: Task, cand: Candidate) -> str:
    """The evaluator's static layer, first: a candidate it disqualifies is not run to compile."""
    if cand.error_kind or not cand.code:
        return f"no code to compile ({cand.error_kind or 'empty'})"
    try:
        rep = static_check(ast.parse(cand.code), cand.entry or task.name)
    except SyntaxError as e:
        return f"syntax error, line {e.lineno}: {e.msg}"
    return f"not compiled: {'; '.join(rep.violations)}" if rep.violations else ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _collect(cache: Path) -> dict[str, bytes]:
    """Every finished cache entry (`<key>/<file>`), up to MAX_FILES_MB; Triton's temp files and
    anything shaped otherwise (links, deeper paths) stay behind."""
    files: dict[str, bytes] = {}
    total = 0
    for p in sorted(cache.glob("*/*")):
        rel = p.relative_to(cache).as_posix()
        if (not _ENTRY.match(rel) or p.is_symlink() or not p.is_file() or p.name == "lock"
                or ".tmp" in p.name):
            continue
        total += p.stat().st_size
        if total > MAX_FILES_MB << 20:
            break
        data = p.read_bytes()
        if p.name.startswith("__grp__"):  # Triton's group file names its members by absolute path
            data = _group_paths(data, lambda child: "/".join(Path(child).parts[-2:]))
        files[rel] = data
    return files


def _group_paths(data: bytes, rename: Any) -> bytes:
    group = json.loads(data)
    paths = {name: rename(path) for name, path in group.get("child_paths", {}).items()}
    return json.dumps(dict(group, child_paths=paths)).encode()


def _checked(rel: str) -> str:
    if not _ENTRY.match(rel):
        raise ValueError(f"not a Triton cache entry name: {rel!r}")
    return rel


def seed_cache(files: dict[str, bytes], cache_dir: str | Path) -> int:
    """Write the entries into a Triton cache directory (each file atomically, existing ones left
    alone); returns how many were written. Names that are not `<key>/<file>` are refused, and a
    group file's members are pointed at this directory."""
    cache_dir = Path(cache_dir).resolve()
    written = 0
    for rel, data in files.items():
        dest = cache_dir / _checked(rel)
        if dest.exists():
            continue
        if dest.name.startswith("__grp__"):
            data = _group_paths(data, lambda child: str(cache_dir / _checked(child)))
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.seed")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        written += 1
    return written
