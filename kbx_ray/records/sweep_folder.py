"""A config -> its sweep id, and the sweep folder's record of what the sweep is (identity.json).

The id is a hash of `identity_key`: every field marked `verdict` (config/identity.py), the grid's
method and model variants as loaded, and the prompt texts. A folder recorded under other verdict
settings is never resumed into: `check_folder` refuses it in one line.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from kbx_ray.config import compose as config
from kbx_ray.config.structured import Config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import Axes, build_axes
from kbx_ray.config.identity import differences, flatten, identity
from kbx_ray.types import stable_hash

IDENTITY_FILE = "identity.json"
log = logging.getLogger(__name__)


def identity_key(cfg: Config, axes: Axes) -> dict[str, Any]:
    """What makes the sweep what it is, flat (`evaluation.fresh_sets` -> 2): every settings field
    marked `verdict` (config/identity.py), each grid variant's method and model as loaded (an
    edited conf/method/*.yaml would otherwise add a second set of cells under the same names), and
    the prompt texts the methods render. Kept in the sweep folder as identity.json."""
    key = identity(cfg)
    for kind, vs in (("method", axes.methods), ("model", axes.models)):
        for v in vs:
            key.update(flatten(v.hashed(), f"variants.{kind}.{v.name}"))
    key["prompts"] = _prompts_digest([v.templates_dir for v in axes.methods])
    return key


def sweep_id(cfg: Config) -> str:
    """The sweep id of a config on its own (a run resolves it once: plan.py)."""
    return folder_name(cfg, identity_key(cfg, build_axes(cfg)))


def folder_name(cfg: Config, key: dict[str, Any]) -> str:
    """Stable across re-runs of the same sweep; `suite.include` is left out so that adding tasks
    resumes into the same results folder. Settings that change what a cell's rows would say (every
    field marked `verdict`, `engine.mode=noop`'s made-up verdicts) make another sweep, so a re-run
    with them never skips cells that were judged otherwise."""
    if cfg.sweep_id:
        return cfg.sweep_id
    digest = stable_hash(key, n=8)
    legacy = f"{cfg.sweep.name}-{digest}"  # before readable names: such a folder still resumes
    if (Path(cfg.output_dir) / legacy).is_dir():
        return legacy
    return f"{readable_name(cfg)}-{digest}"


def readable_name(cfg: Config) -> str:
    """`<sweep or method>-<model>-<suite>`: what the results folder and the W&B run are called
    (the hash after it is the identity)."""
    def few(names: list[str], what: str) -> str:
        return "+".join(names) if len(names) <= 2 else f"{len(names)}{what}"

    head = cfg.sweep.name if cfg.sweep.name != "default" else \
        few(list(cfg.sweep.methods) or [cfg.method.name], "methods")
    model = few(list(cfg.sweep.models) or [cfg.model.name], "models")
    raw = f"{head}-{model}-{cfg.suite.name}"
    return "".join(ch if ch.isalnum() or ch in "._+-" else "_" for ch in raw)


def _prompts_digest(override_dirs: list[str | None]) -> str:
    """The text of every prompt template a sweep's methods can render."""
    h = hashlib.sha256()
    for d in [config.CONF_DIR / "prompts", *sorted({Path(o).expanduser() for o in override_dirs if o})]:
        for f in sorted(d.glob("*.txt")) if d.is_dir() else []:
            h.update(f"{f.name}\0".encode() + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def check_folder(now: dict[str, Any], sweep_dir: Path, force_resume: bool = False) -> None:
    """A folder recorded under other verdict settings is never resumed into (its cells would be
    skipped though judged otherwise): one line says which settings differ and how to go on. Only
    `sweep_id=` or a legacy folder name lead here (a hashed name changes with the settings); a new
    folder beside one of the same name says in the log what made it another sweep."""
    recorded = _recorded(sweep_dir)
    if recorded is None:
        if not sweep_dir.exists():
            _name_the_sibling(sweep_dir, now)
        return
    diff = differences(recorded, now)
    if diff and force_resume:
        log.warning("force_resume: resuming %s although %s", sweep_dir, "; ".join(diff))
    elif diff:
        more = f" (and {len(diff) - 2} more)" if len(diff) > 2 else ""
        raise ConfigError(f"{sweep_dir} was recorded with other verdict settings: "
                          f"{'; '.join(diff[:2])}{more}; drop sweep_id= to start a new sweep, or "
                          "add force_resume=true to resume it anyway (its verdicts would mix both)")


def write_folder(key: dict[str, Any], sweep_dir: Path, force_resume: bool = False) -> None:
    """identity.json, once (force_resume: the settings it now resumes with)."""
    path = sweep_dir / IDENTITY_FILE
    if not path.exists() or force_resume:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(key, indent=1, sort_keys=True, default=str))
        tmp.replace(path)


def _recorded(sweep_dir: Path) -> dict | None:
    try:
        return json.loads((sweep_dir / IDENTITY_FILE).read_text())
    except (OSError, ValueError):
        return None


def _name_the_sibling(sweep_dir: Path, now: dict) -> None:
    stem = sweep_dir.name.rsplit("-", 1)[0]
    if not sweep_dir.parent.is_dir():
        return
    siblings = sorted(sweep_dir.parent.glob(f"{stem}-*/{IDENTITY_FILE}"),
                      key=lambda f: f.stat().st_mtime)
    for f in reversed(siblings):
        recorded = _recorded(f.parent)
        diff = differences(recorded, now) if recorded is not None else []
        if diff:
            more = f" (and {len(diff) - 3} more)" if len(diff) > 3 else ""
            log.info("a new sweep, not a resume of %s: %s%s", f.parent.name, "; ".join(diff[:3]),
                     more)
            return
