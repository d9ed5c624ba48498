"""conf/ and `key=value` overrides -> a typed `Config` (the schema is structured.py's).

Hydra is not used (hydra-core 1.3 pins omegaconf < 2.4), so this module does the little of it we
need: `group=name` picks conf/<group>/<name>.yaml, other `a.b=v` items override keys, and every
mistake becomes one `ConfigError` line that names the key and the fix. The grid (variants, cells)
is in grid.py, and the sweep's id and folder record in sweep_folder.py; both import this module,
never the reverse. ConfigError lives in errors.py (a leaf) and is importable from here.
"""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kbx_ray.errors import ConfigError
from kbx_ray.config.schema import choice_fields, explain, out_of_bounds, spell_booleans
from kbx_ray.config.structured import Config

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("suite", "model", "method", "sweep")
_SETUP: dict[str, str] = {}  # model preset name -> the command that makes its local files


def _group_file(group: str, name: str) -> Path:
    path = CONF_DIR / group / f"{name}.yaml"
    if not path.exists():
        choices = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        raise ConfigError(f"unknown {group} {name!r}: choose one of {', '.join(choices)} "
                          f"or add conf/{group}/{name}.yaml")
    return path


def _load_group(group: str, name: str, seen: tuple[str, ...] = ()) -> DictConfig:
    """A group file with `base: <name>` resolved: that file of the same group first, this file's
    keys over it. Variants are declared as a few keys, not copied (lm-eval-harness's `include:`)."""
    if name in seen:
        raise ConfigError(f"conf/{group}/{name}.yaml: `base:` loops back "
                          f"({' -> '.join((*seen, name))}); remove one of the base keys")
    node = OmegaConf.load(_group_file(group, name))
    base = node.pop("base", None) if isinstance(node, DictConfig) else None
    setup = node.pop("setup", None) if isinstance(node, DictConfig) else None
    if setup:  # not a model setting (it would change every cell id): kept beside the config
        _SETUP[str(node.get("name", name))] = str(setup)
    if base is None:
        return node
    return _merge(_load_group(group, str(base), (*seen, name)), node, f"conf/{group}/{name}.yaml")


def _merge(base: DictConfig, other: Any, where: str, schema: type | None = None,
           prefix: str = "") -> DictConfig:
    """`other` over `base`; `schema` (default `Config`, at `prefix` of it) types both: its choice
    fields take the booleans YAML makes of on/off, and any error is one line (config/schema.py)."""
    schema = schema or Config
    spell_booleans(other, schema)
    try:
        return OmegaConf.merge(base, other)
    except OmegaConfBaseException as e:
        raise explain(e, schema, where, prefix) from None


def load_config(overrides: list[str] | None = None) -> Config:
    """conf/config.yaml, then group picks, then key=value overrides; validated against `Config`."""
    cfg = OmegaConf.structured(Config)
    cfg = _merge(cfg, OmegaConf.load(CONF_DIR / "config.yaml"), "conf/config.yaml")
    groups, dotlist = {}, []
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. model=reference)")
        key, value = item.split("=", 1)
        if key in GROUPS:
            groups[key] = value
        elif key == "hardware" and not value.startswith("["):
            dotlist.append(f"hardware=[{value}]")
        else:
            dotlist.append(item)
    for group in GROUPS:
        name = groups.get(group)
        if name is not None:
            node = OmegaConf.create({group: _load_group(group, name)})
            cfg = _merge(cfg, node, f"conf/{group}/{name}.yaml")
    try:
        cli = OmegaConf.from_dotlist(dotlist)
    except OmegaConfBaseException as e:
        raise ConfigError(f"cannot parse overrides: {str(e).splitlines()[0]}") from None
    cfg = _merge(cfg, cli, "the command line")
    if cfg.sweep.hardware and "hardware" not in cli:  # the sweep file's pools, unless overridden
        cfg.hardware = cfg.sweep.hardware
    _refuse_ignored(cfg, groups, cli)
    cfg.overrides = list(overrides or [])
    try:
        out: Config = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except ValueError as e:  # a dataclass's own check (e.g. TimingConfig.feed)
        raise ConfigError(f"bad setting: {str(e).splitlines()[0]}") from None
    line = out_of_bounds(out)  # the schema's `bounded` fields
    if line:
        raise ConfigError(line)
    return out


def _refuse_ignored(cfg: DictConfig, groups: dict[str, str], cli: DictConfig) -> None:
    """A pick or key that the sweep's axes would override is refused, not dropped in silence."""
    for group, axis in (("model", "models"), ("method", "methods")):
        names = list(cfg.sweep[axis])
        if group in groups and names:
            raise ConfigError(f"{group}={groups[group]} has no effect: the sweep's {axis} axis is "
                              f"[{', '.join(names)}]; set sweep.{axis}=[{groups[group]}] instead")
        if names and len(names) > 1 and "name" in (cli.get(group) or {}):
            raise ConfigError(f"{group}.name cannot label every variant of sweep.{axis} "
                              f"[{', '.join(names)}]: drop {group}.name")
    if cfg.sweep.rounds and "rounds" in (cli.get("method") or {}):
        raise ConfigError(f"method.rounds={cli.method.rounds} conflicts with the sweep's rounds "
                          f"axis {list(cfg.sweep.rounds)}: set sweep.rounds=[{cli.method.rounds}] "
                          "instead")


def setup_hint(model_name: str, path: str) -> str:
    """The command that builds a preset's local weights folder, if its preset names one."""
    hint = _SETUP.get(model_name, "")
    return hint.replace("{path}", path)


_YAML_HEAD = """\
# Every setting and its default, as the schema (config/structured.py) defines them; a test fails
# when they drift apart. Regenerate after changing a default:
#   python -c "from kbx_ray.config.compose import default_yaml as d; print(d(), end='')" >conf/config.yaml
# Presets (conf/<group>/<name>.yaml) and the command line override these keys:
#   python scripts/sweep.py model=reference suite.include=[math] evaluation.seeds=5
# The default sweep: every task of the suite, model=reference (the project's own solutions),
# one_shot, on the local hardware (GPU if present, else the Triton interpreter on CPU). Rows go to
# Parquet (always first: the record), then to `sinks` in order (kbx_ray/sinks/).
"""


def choice_keys() -> list[tuple[str, type[Enum], str]]:
    """(key, its Enum, its default) of every choice-valued key, in the schema's order (the help
    text lists them), each registered sink's options' (`sink.<name>.<key>`) after them."""
    from kbx_ray.sinks import option_types

    defaults = OmegaConf.structured(Config)
    out = [(k, e, _spelled(OmegaConf.select(defaults, k))) for k, e in choice_fields(Config)]
    for name, schema in option_types().items():
        node = OmegaConf.structured(schema)
        out += [(f"sink.{name}.{k}", e, _spelled(OmegaConf.select(node, k)))
                for k, e in choice_fields(schema)]
    return out


def _spelled(value: Any) -> str:
    """A choice key's default as the command line spells it (a list of choices: `[a, b]`)."""
    if OmegaConf.is_list(value):
        return f"[{','.join(map(str, value))}]"
    return str(value)


def default_yaml() -> str:
    """conf/config.yaml's text: every field of `Config` at its default, and under `sink` each
    registered sink's options at theirs."""
    from kbx_ray.sinks import option_defaults

    node = OmegaConf.structured(Config)
    node.sink = option_defaults()
    return _YAML_HEAD + OmegaConf.to_yaml(node)


def to_dict(cfg: Config) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # type: ignore
