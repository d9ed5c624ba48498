"""Import a task file by path, and select task ids by pattern: what suites/builtin.py (tasks/) and
every external suite format (kbx_ray/suites/) share. A leaf beside both, so the suite formats need
not import builtin.py, which looks them up.
"""
from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from kbx_ray.errors import SuiteError


def load_module(path: str | Path, prefix: str = "kbx_suite") -> ModuleType:
    """Import a task file by path (cached by path and content hash)."""
    path = Path(path).resolve()
    return _load_module(str(path), hashlib.sha256(path.read_bytes()).hexdigest()[:12], prefix)


@lru_cache(maxsize=None)
def _load_module(path: str, digest: str, prefix: str) -> ModuleType:
    name = f"{prefix}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _did_you_mean(pat: str, ids: list[str]) -> str:
    """` (did you mean 'activation/relu'?)` for a near miss: a typo, or the name without its
    category; "" when nothing is close."""
    import difflib

    near = difflib.get_close_matches(pat.lower(), [i.lower() for i in ids], n=2, cutoff=0.75)
    by_stem = [i for i in ids if i.rsplit("/", 1)[-1].lower() == pat.lower()]
    names = [next(i for i in ids if i.lower() == n) for n in near] or by_stem[:2]
    return f" (did you mean {' or '.join(repr(n) for n in names)}?)" if names else ""


def select_ids(ids: list[str], include: list[str] | None) -> list[str]:
    """Keep ids matching any pattern: an exact id, a category folder, or a glob."""
    if not include:
        return ids
    chosen: list[str] = []
    for pat in include:
        pat = str(pat).strip().rstrip("/")
        hits = [i for i in ids if i == pat or i.split("/")[0] == pat or fnmatch.fnmatch(i, pat)]
        if not hits:
            raise SuiteError(f"unknown task {pat!r}{_did_you_mean(pat, ids)}: run `kbx tasks` to "
                             "list ids (a pattern may be an id, a category folder or a glob)")
        chosen += [h for h in hits if h not in chosen]
    return [i for i in ids if i in chosen]
