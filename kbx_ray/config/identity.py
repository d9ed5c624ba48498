"""Which settings make a sweep what it is: each dataclass field marks itself.
More: kbx_ray/config/README.md, `identity.py`.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

KEY = "kbx_identity"  # field metadata: "verdict" | "exempt" | "walk"
WHY = "kbx_identity_why"
AS = "kbx_identity_as"  # verdict only: a function of the value, what the identity keeps of it
OMIT_EMPTY = "kbx_identity_omit_empty"  # verdict only: left out while empty

# reasons most exempt fields share
RUN = "how the sweep runs, not what a row says"
LIMIT = ("an operational limit or cache: a resume may raise it for the cells left (a cell it "
         "stopped stays recorded as it was)")
FILLED = "filled in from the hardware pool, which is in the identity"


def _field(kind: str, default: Any, factory: Any, extra: dict) -> Any:
    meta = {KEY: kind, **extra}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def verdict(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
            as_: Callable[[Any], Any] | None = None, omit_empty: bool = False) -> Any:
    """A field that can change a verdict: part of the sweep's identity (a nested dataclass: all of
    it). `as_` keeps only what matters of the value (engine.mode: only whether it is noop);
    `omit_empty`: left out while empty (a field added after sweeps were recorded: they resume)."""
    return _field("verdict", default, factory,
                  {**({AS: as_} if as_ else {}), **({OMIT_EMPTY: True} if omit_empty else {})})


def exempt(default: Any = dataclasses.MISSING, *, why: str,
           factory: Any = dataclasses.MISSING) -> Any:
    """A field that cannot change a verdict, or may change on a resume on purpose: `why` says."""
    if not why.strip():
        raise ValueError("exempt(...) needs a reason")
    return _field("exempt", default, factory, {WHY: why})


def walk(factory: Any) -> Any:
    """A nested settings dataclass whose fields are marked one by one."""
    return dataclasses.field(default_factory=factory, metadata={KEY: "walk"})


def mark(f: dataclasses.Field) -> str:
    return str(f.metadata.get(KEY, ""))


def identity(obj: Any, prefix: str = "") -> dict[str, Any]:
    """The verdict fields of a settings dataclass instance (or OmegaConf structured node), flat:
    dotted name -> value (nested dicts flattened too, so a difference names its key)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(_dataclass_type(obj)):
        kind, value, name = mark(f), getattr(obj, f.name), f"{prefix}{f.name}"
        if kind == "exempt":
            continue
        if kind == "walk":
            out.update(identity(value, f"{name}."))
            continue
        if f.metadata.get(OMIT_EMPTY) and not value:
            continue
        if f.metadata.get(AS):
            value = f.metadata[AS](value)
        out.update(flatten(_plain(value), name))
    return out


def unmarked(cls: type, prefix: str = "") -> list[str]:
    """Fields of `cls` (and of the dataclasses it walks into) with neither mark."""
    out = []
    for f in dataclasses.fields(cls):
        kind = mark(f)
        if kind not in ("verdict", "exempt", "walk"):
            out.append(f"{prefix}{f.name}")
        elif kind == "walk":
            out += unmarked(_field_type(cls, f), f"{prefix}{f.name}.")
    return out


def flatten(value: Any, name: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{name}.{k}"))
        return out
    return {name: value}


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """`key=old -> new` for each identity key that differs (missing on one side: `unset`)."""
    out = []
    for k in sorted(set(recorded) | set(now)):
        a, b = recorded.get(k, "unset"), now.get(k, "unset")
        if _json(a) != _json(b):
            out.append(f"{k}={a!r} -> {b!r}")
    return out


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _plain(value: Any) -> Any:
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _dataclass_type(obj: Any) -> type:
    if dataclasses.is_dataclass(obj):
        return obj if isinstance(obj, type) else type(obj)
    from omegaconf import OmegaConf

    return OmegaConf.get_type(obj)  # type: ignore[return-value]


def _field_type(cls: type, f: dataclasses.Field) -> type:
    factory = f.default_factory  # type: ignore[misc]
    if isinstance(factory, type) and dataclasses.is_dataclass(factory):
        return factory
    return type(factory())
