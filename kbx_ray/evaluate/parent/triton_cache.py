"""Ahead-of-time kernels -> a sandbox worker's own Triton cache, written by the parent.
More: kbx_ray/evaluate/parent/README.md, `triton_cache.py`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kbx_ray.evaluate.parent.home_files import write_fresh

ENTRY = re.compile(r"^[A-Za-z0-9_\-]{8,128}/[A-Za-z0-9_.\-]{1,200}$")  # <key>/<file>, nothing else
CACHE_NAME = "triton_cache"  # the worker's cache, inside its temp dir


def worker_cache(home: str) -> str:
    """The Triton cache of the worker whose temp dir is `home` (made if missing)."""
    path = os.path.join(home, CACHE_NAME)
    os.makedirs(path, exist_ok=True)
    return path


def checked_name(rel: str) -> str:
    """`rel` if it names a cache entry (`<key>/<file>`), else ValueError."""
    if not ENTRY.match(rel):
        raise ValueError(f"not a Triton cache entry name: {rel!r}")
    return rel


def seed_cache(files: dict[str, bytes], cache_dir: str | Path) -> int:
    """Write the entries into a Triton cache directory (each file atomically; existing names, links
    included, left alone); returns how many were written. Names that are not `<key>/<file>` are
    refused; a key directory that is a link (a GPU candidate can write this cache) is skipped, as is
    a group file naming anything outside its key; group members are pointed at this directory."""
    if os.path.islink(cache_dir):
        return 0  # the worker replaced its cache by a link: nothing goes there
    os.makedirs(cache_dir, exist_ok=True)
    cache_dir = Path(cache_dir).resolve()
    written = 0
    for rel, data in files.items():
        dest = cache_dir / checked_name(rel)
        key_dir = dest.parent
        if key_dir.is_symlink() or os.path.lexists(dest):
            continue
        if dest.name.startswith("__grp__"):
            data = _absolute_group(data, cache_dir, key_dir.name)
            if data is None:
                continue
        key_dir.mkdir(parents=True, exist_ok=True)
        if key_dir.is_symlink() or not key_dir.resolve().parent == cache_dir:
            continue
        write_fresh(dest, data)
        written += 1
    return written


def _absolute_group(data: bytes, cache_dir: Path, key: str) -> bytes | None:
    try:
        rel = json.loads(data)["child_paths"]
        paths = {name: str(cache_dir / checked_name(str(r))) for name, r in rel.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not all(str(r).split("/", 1)[0] == key for r in rel.values()):
        return None
    return json.dumps({"child_paths": paths}).encode()
