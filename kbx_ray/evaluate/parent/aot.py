"""Ahead-of-time Triton compiles on CPU nodes, and seeding a GPU worker's cache with them.
More: kbx_ray/evaluate/parent/README.md, `aot.py`.
"""
from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kbx_ray.evaluate.static.checks import static_check
from kbx_ray.evaluate.parent.redaction import redact
from kbx_ray.evaluate.parent.spawn import confine_spec, kill_group, scrubbed_env, spawn
from kbx_ray.evaluate.parent.triton_cache import ENTRY as _ENTRY
from kbx_ray.evaluate.parent.triton_cache import seed_cache  # noqa: F401 - the seeding's home
from kbx_ray.evaluate.settings import SandboxConfig
from kbx_ray.types import Candidate, Task

MAX_FILES_MB = 64  # what one candidate's compiles may bring back


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
                      cfg: SandboxConfig | None = None, real_inputs_mb: float = 512,
                      seed: int = 0) -> AotResult:
    """Compile the candidate's kernels for sm_`arch` on this (CPU) machine, in the sandbox (`cfg`:
    the evaluation's sandbox settings, run on the CPU). A case that fake tensors cannot trace is
    retried on real CPU inputs up to `real_inputs_mb`. `seed`: the evaluation's base seed (inputs
    whose shapes depend on it trace the shapes the GPU will see)."""
    cfg = replace(cfg, device="cpu") if cfg is not None else SandboxConfig(device="cpu")
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
               "entry": task.name, "cases": list(task.cases), "seed": seed,
               "real_inputs_mb": real_inputs_mb}
        reply_path = Path(home) / "reply.json"  # a file: RLIMIT_FSIZE caps what comes back
        with open(reply_path, "wb") as reply_fp:
            proc = spawn([sys.executable, "-m", "kbx_ray.evaluate.worker.aot_compile"],
                         confine_spec(cfg), home, env, stdin=subprocess.PIPE, stdout=reply_fp,
                         stderr=subprocess.DEVNULL)
        try:
            proc.communicate(json.dumps(req).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            res.error = f"ahead-of-time compile timed out after {timeout_s:g} s"
        finally:
            kill_group(proc)
        out = _read_regular(reply_path, 1 << 20) or b""
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
        rep = static_check(ast.parse(cand.code), task.name)
    except SyntaxError as e:
        return f"syntax error, line {e.lineno}: {e.msg}"
    return f"not compiled: {'; '.join(rep.violations)}" if rep.violations else ""


def _collect(cache: Path) -> dict[str, bytes]:
    """Every finished cache entry (`<key>/<file>`), up to MAX_FILES_MB. Nothing is followed: the
    candidate could have made any name there a link (to a key file of this node, say), so only real
    directories and regular files count, opened with O_NOFOLLOW. Triton's temp files, deeper paths
    and group files that name anything but entries of their own key stay behind."""
    files: dict[str, bytes] = {}
    total = 0
    for d in sorted(os.scandir(cache), key=lambda e: e.name):
        if not d.is_dir(follow_symlinks=False) or not _ENTRY.match(f"{d.name}/x"):
            continue
        for f in sorted(os.scandir(d.path), key=lambda e: e.name):
            rel = f"{d.name}/{f.name}"
            if (not _ENTRY.match(rel) or not f.is_file(follow_symlinks=False) or f.name == "lock"
                    or ".tmp" in f.name):
                continue
            data = _read_regular(Path(f.path), (MAX_FILES_MB << 20) - total)
            if data is None:
                return files
            total += len(data)
            if f.name.startswith("__grp__"):  # Triton names a group's members by absolute path
                data = _relative_group(data, d.name)
                if data is None:
                    continue
            files[rel] = data
    return files


def _read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (no link followed), or None if it is not one or is over `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fp:
        if not stat.S_ISREG(os.fstat(fp.fileno()).st_mode):
            return None
        data = fp.read(limit + 1)
    return data if len(data) <= limit else None


def _relative_group(data: bytes, key: str) -> bytes | None:
    """A group file with its members as `<key>/<file>` of its own key, or None if it names anything
    else (the candidate may have written it)."""
    try:
        children = json.loads(data)["child_paths"]
        rel = {name: f"{key}/{Path(str(path)).name}" for name, path in children.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not all(_ENTRY.match(r) and Path(str(children[n])).parent.name == key for n, r in rel.items()):
        return None
    return json.dumps({"child_paths": rel}).encode()
