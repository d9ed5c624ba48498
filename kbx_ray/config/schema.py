"""What the typed config schema (OmegaConf structured dataclasses) needs beyond OmegaConf itself.
More: kbx_ray/config/README.md, `schema.py`.
"""
from __future__ import annotations

import dataclasses
import re
import typing
from difflib import get_close_matches
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from kbx_ray.errors import ConfigError, did_you_mean

_BOOLEAN = {True: ("on", "true"), False: ("off", "false")}
BOUNDS = "kbx_bounds"  # field metadata: (low, high, why) of a bounded number


class Choice(StrEnum):
    """A choice-valued setting; members are named as they are spelled."""

    @classmethod
    def choices(cls) -> list[str]:
        return [m.value for m in cls]


def bounded(default: Any, low: float | None = None, high: float | None = None,
            why: str = "") -> Any:
    """A number field (or a list of numbers: each item) held to `low <= value <= high` (None: no
    bound on that side); `default` is its default, or a field made already (identity.py's
    `verdict`/`exempt`). `out_of_bounds` checks every such field once the config is typed; `why`
    follows the range in the error line."""
    f = default if isinstance(default, dataclasses.Field) else dataclasses.field(
        **({"default_factory": lambda: type(default)(default)}
           if isinstance(default, (list, dict)) else {"default": default}))
    f.metadata = MappingProxyType({**f.metadata, BOUNDS: (low, high, why)})
    return f


def out_of_bounds(obj: Any, prefix: str = "") -> str | None:
    """One line naming the first `bounded` field of a settings dataclass instance (nested ones
    included) whose value is out of its range, and the range; None where every one is within. A
    subclass that gives a bounded field another default keeps its base's bound."""
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            line = out_of_bounds(value, f"{key}.")
            if line:
                return line
        bounds = [c.__dataclass_fields__[f.name].metadata[BOUNDS] for c in type(obj).__mro__
                  if f.name in getattr(c, "__dataclass_fields__", {})
                  and BOUNDS in c.__dataclass_fields__[f.name].metadata]
        if not bounds:
            continue
        low, high, why = bounds[0]
        items = enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, v in items:
            if (low is not None and v < low) or (high is not None and v > high):
                span = (f"{low}-{high}" if low is not None and high is not None else
                        f"{low} or more" if low is not None else f"{high} or less")
                at = key if i is None else f"{key}[{i}]"
                return f"{at}={v}: choose {span}{f' ({why})' if why else ''}"
    return None


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
                   f"{at.rstrip('.') or 'the top level'} takes {', '.join(known) or 'no keys'}")
            return ConfigError(f"unknown key {prefix}{key} in {where}: {fix}")
    if isinstance(e, ValidationError) and key:
        enum = _enum_of(type_at(schema, re.sub(r"\[\d+\]", "", key)))  # a list's item: its type
        if enum is not None:
            value = first.split("'")[1] if first.count("'") >= 2 else first
            return choice_error(prefix + key, value, enum)
    return ConfigError(f"bad config in {where}: {prefix + key + ': ' if key else ''}{first}")


def typed(schema: type, given: Any, prefix: str, where: str = "the config") -> Any:
    """`given` (a mapping or a dataclass) typed by the dataclass `schema`, at `prefix` of the
    config ("model.options."): an instance of it, or one ConfigError line (a value out of its
    `bounded` range, or one its own `__post_init__` refuses, too)."""
    try:
        out = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), given or {}))
    except OmegaConfBaseException as e:
        raise explain(e, schema, where, prefix=prefix) from None
    except ValueError as e:
        line = str(e).splitlines()[0]
        raise ConfigError(f"bad {prefix.rstrip('.')} in {where}: {line}") from None
    line = out_of_bounds(out, prefix)
    if line:
        raise ConfigError(f"{where}: {line}")
    return out


@dataclasses.dataclass
class NoOptions:
    """What an entry that registered no options takes."""


class Optioned:
    """A settings dataclass whose `options` mapping is typed by the `options=` dataclass of the
    entry it names in the registry `KIND` (a model's backend, a method's kind, a suite's format).

    `LIFTED`: keys that stood at its top level before they moved into `options`, each with its
    default then. `hashed` lays them out so again: cell ids and sweep ids hash it, so the sweeps
    recorded before resume."""

    KIND: ClassVar[str] = ""       # the registry kind
    KEY: ClassVar[str] = ""        # where it sits in the config: model, method, suite
    ENTRY: ClassVar[str] = ""      # the field naming its entry ("": its name)
    LIFTED: ClassVar[dict[str, Any]] = {}
    name: str
    options: dict[str, Any]

    def options_type(self) -> type | None:
        """The dataclass its entry registered (None: the entry takes none, or is unknown)."""
        from kbx_ray.registry import registry

        known, name = registry(self.KIND), getattr(self, self.ENTRY) or self.name
        return known.entry(name).options if name in known else None

    def typed_options(self) -> Any:
        """`options` as the registered dataclass; an unknown key or a bad value is one line."""
        return typed(self.options_type() or NoOptions, dict(self.options or {}),
                     f"{self.KEY}.options.", f"{self.KEY} {self.name}")

    def hashed(self) -> dict[str, Any]:
        """Its fields as laid out before `LIFTED` moved: a lifted key given as a mapping stands as
        given (a typed section's `args`, the keys it cannot list, merged in), another takes its
        typed value (as given where its options do not type), and one its options lack takes its
        default then; `options` keeps the rest, as given."""
        out = OmegaConf.to_container(OmegaConf.structured(self))
        given = dict(out.pop("options") or {})  # type: ignore[union-attr]
        try:
            opts = self.typed_options() if self.LIFTED else None
        except ConfigError:  # not a variant of the grid (an axis replaces it): hashed as given
            opts = None
        for key, before in self.LIFTED.items():
            raw, value = given.pop(key, None), getattr(opts, key, None)
            if opts is None and raw is not None:
                out[key] = raw
            elif isinstance(raw, dict):
                out[key] = {**{k: v for k, v in raw.items() if k != "args"}, **raw.get("args", {})}
            elif hasattr(opts, key) and not dataclasses.is_dataclass(value):
                out[key] = value
            else:
                out[key] = before
        out["options"] = given  # type: ignore[index]
        return out  # type: ignore[return-value]
