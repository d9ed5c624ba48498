"""Module-rooted chains in candidate source (`torch.cuda.x`, `tl.core.y`) -> the real object they
name, and why it is out of reach: a module outside torch and triton (`torch.os`, any alias a
library keeps), a refused torch/triton module or object (`policy.BANNED_*`), or a name
outside the host API. Resolved in the trusted parent, importing submodules as Python would.
"""
from __future__ import annotations

import importlib
import inspect
from functools import lru_cache
from typing import Any

from kbx_ray.evaluate.static.policy import (BANNED_MODULES, BANNED_NAMES, BANNED_OBJECTS,
                                            DANGER_MODULES, MISSING, ROOTS, STDLIB_ALLOW,
                                            banned_attr_name, outside_host_api)


@lru_cache(maxsize=None)
def _banned_ids() -> frozenset[int]:
    ids = set()
    for path in BANNED_OBJECTS:
        obj = walk(path.split("."))
        if obj is not MISSING:
            ids.add(id(obj))
    return frozenset(ids)


def walk(parts: list[str]) -> Any:
    """The object a dotted chain names (importing submodules as Python would), or MISSING."""
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return MISSING
    for a in parts[1:]:
        obj = _step(obj, a)
        if obj is MISSING:
            break
    return obj


def _step(obj: Any, attr: str) -> Any:
    if inspect.ismodule(obj):
        nxt = getattr(obj, attr, MISSING)
        name = f"{obj.__name__}.{attr}"
        if nxt is MISSING and not _banned_module(name):
            try:
                nxt = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not a submodule: the candidate fails at run time
                nxt = MISSING
        return nxt
    return inspect.getattr_static(obj, attr, MISSING)


def _banned_module(name: str) -> bool:
    return any(name == b or name.startswith(b + ".") for b in BANNED_MODULES)


@lru_cache(maxsize=4096)
def resolve_chain(chain: tuple[str, ...]) -> str | None:
    """Why the module-rooted chain `chain` is out of reach, or None when it is fine."""
    root = chain[0]
    if root in STDLIB_ALLOW:
        allow = STDLIB_ALLOW[root]
        name = chain[1] if len(chain) > 1 else ""
        if name and (name.startswith("_") or (allow is not None and name not in allow)):
            return f"uses {root}.{name} (allowed from {root}: {', '.join(sorted(allow or []))})"
        return None
    obj = walk([root])
    if obj is MISSING:
        return f"uses the module {root!r}"
    why = outside_host_api(chain)
    if why:
        return why
    for i, attr in enumerate(chain[1:], 2):
        full = ".".join(chain[:i])
        if attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__")):
            return f"reaches the private {full}"
        if inspect.ismodule(obj) and _banned_module(f"{obj.__name__}.{attr}"):
            return f"uses {full}"
        obj = _step(obj, attr)
        if obj is MISSING:
            return None  # not in this torch/triton: the candidate fails at run time
        why = _judge(obj, full)
        if why:
            return why
    return None


def _pointer_type(obj: Any) -> bool:
    """`obj` is a Triton pointer type, or its class, under whatever name (`tl.pi32_t`)."""
    try:
        from triton.language import core
    except ImportError:  # pragma: no cover - no triton: nothing to name
        return False
    cls = core.pointer_type
    return isinstance(obj, cls) or (isinstance(obj, type) and issubclass(obj, cls))


def _judge(obj: Any, full: str) -> str | None:
    if id(obj) in _banned_ids():
        return f"uses {full}"
    if _pointer_type(obj):  # a cast to it turns an integer into an address (INTEGRITY.md class 1)
        return f"uses {full}, a pointer type (d1p_pi32_constexpr_relu)"
    if inspect.ismodule(obj):
        name = obj.__name__
        if name.split(".")[0] not in ROOTS:
            return f"reaches the module {name} through {full}"
        return f"uses {full}" if _banned_module(name) else None
    try:
        mod = getattr(obj, "__module__", None)
    except Exception:  # noqa: BLE001
        mod = None
    if isinstance(mod, str):
        if mod.split(".")[0] in DANGER_MODULES:
            return f"uses {full} (from {mod})"
        if mod == "builtins" and getattr(obj, "__name__", "") in BANNED_NAMES:
            return f"uses {full} (the builtin {obj.__name__})"
    return None

@lru_cache(maxsize=256)
def closed_module(chain: tuple[str, ...]) -> bool:
    """True when the module `chain` names may be passed around as a value: a triton.language
    module none of whose public names leads out of reach (`tl.math`, `libdevice`), so whatever a
    function does with it by attribute is what the chain itself could do."""
    obj = walk(list(chain))
    if not inspect.ismodule(obj) or not obj.__name__.startswith("triton.language"):
        return False
    for name, value in vars(obj).items():
        if name.startswith("_") or not (resolve_chain((*chain, name)) or banned_attr_name(name)):
            continue
        mod, short = getattr(value, "__module__", ""), getattr(value, "__name__", "")
        allow = STDLIB_ALLOW.get(mod or "", frozenset())
        if allow is None or short not in (allow or ()):  # functools.wraps: importable anyway
            return False
    return True
