"""What the typed config schema (OmegaConf structured dataclasses) needs beyond OmegaConf itself.
More: kbx_ray/README.md, `schema.py`.
"""
from __future__ import annotations

import dataclasses
import typing
from difflib import get_close_matches
from enum import Enum, StrEnum
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from kbx_ray.errors import ConfigError, did_you_mean

_BOOLEAN = {True: ("on", "true"), False: ("off", "false")}


class Choice(StrEnum):
    """A choice-valued setting; members are named as they are spelled."""

    @classmethod
    def choices(cls) -> list[str]:
        return [m.value for m in cls]


def field_types(schema: type) -> dict[str, Any]:
    """name -> the resolved annotation of each field of a dataclass."""
    hints = typing.get_type_hints(schema)
    return {f.name: hints[f.name] for f in dataclasses.fields(schema)}


def _dataclass_of(annotation: Any) -> type | None:
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    return None


def _enum_of(annotation: Any) -> type[Enum] | None:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return _enum_of(args[0]) if len(args) == 1 else None


def type_at(schema: type, dotted: str) -> Any:
    """The annotation at a dotted key of the schema, or None where the schema has no such key."""
    annotation: Any = schema
    for part in dotted.split("."):
        cls = _dataclass_of(annotation)
        if cls is None:
            return None
        annotation = field_types(cls).get(part)
    return annotation


def spell_booleans(node: Any, schema: type) -> None:
    """In place: a boolean under a choice field whose members include on/off or true/false becomes
    that member's name."""
    if not isinstance(node, (DictConfig, dict)):
        return
    for name, annotation in field_types(schema).items():
        if name not in node:
            continue
        value = node[name]
        enum, sub = _enum_of(annotation), _dataclass_of(annotation)
        if enum is not None and isinstance(value, bool):
            spelled = [s for s in _BOOLEAN[value] if s in enum.__members__]
            if spelled:
                node[name] = spelled[0]
        elif sub is not None:
            spell_booleans(value, sub)


def choice_fields(schema: type, prefix: str = "") -> list[tuple[str, type[Enum]]]:
    """(dotted key, Enum) of every choice field of the schema, nested dataclasses included."""
    out: list[tuple[str, type[Enum]]] = []
    for name, annotation in field_types(schema).items():
        enum, sub = _enum_of(annotation), _dataclass_of(annotation)
        if enum is not None:
            out.append((prefix + name, enum))
        elif sub is not None:
            out += choice_fields(sub, f"{prefix}{name}.")
    return out


def choice_error(key: str, value: Any, enum: type[Enum]) -> ConfigError:
    choices = [m.name for m in enum]
    return ConfigError(f"{key}={str(value)!r} is not a choice: choose one of {', '.join(choices)}"
                       f"{did_you_mean(str(value), choices)}")


def explain(e: OmegaConfBaseException, schema: type, where: str,
            prefix: str = "") -> ConfigError:
    """One line for an OmegaConf error met while merging `where` into `schema`, which sits at
    `prefix` (e.g. "sink.tally.") of the whole config: keys are named from the config's top. A
    key that a dataclass's `MOVED` lists is named with where it went."""
    key = str(getattr(e, "full_key", "") or "")
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, ConfigKeyError) and key:
        parent, _, leaf = key.rpartition(".")
        owner = _dataclass_of(type_at(schema, parent) if parent else schema)
        moved = getattr(owner, "MOVED", {}).get(leaf) if owner is not None else None
        if moved:
            return ConfigError(f"{prefix}{key} in {where} has moved: {moved}")
        if owner is not None:
            known = list(field_types(owner))
            at = prefix + (f"{parent}." if parent else "")
            near = [at + k for k in get_close_matches(leaf, known, n=3)]
            fix = (f"did you mean {', '.join(near)}?" if near else
                   f"{at.rstrip('.') or 'the top level'} takes {', '.join(known)}")
            return ConfigError(f"unknown key {prefix}{key} in {where}: {fix}")
    if isinstance(e, ValidationError) and key:
        enum = _enum_of(type_at(schema, key))
        if enum is not None:
            value = first.split("'")[1] if first.count("'") >= 2 else first
            return choice_error(prefix + key, value, enum)
    return ConfigError(f"bad config in {where}: {prefix + key + ': ' if key else ''}{first}")


def typed(schema: type, given: Any, prefix: str, where: str = "the config") -> Any:
    """`given` (a mapping or a dataclass) typed by the dataclass `schema`, at `prefix` of the
    config ("model.options."): an instance of it, or one ConfigError line."""
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), given or {}))
    except OmegaConfBaseException as e:
        raise explain(e, schema, where, prefix=prefix) from None
