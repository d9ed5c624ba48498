"""A sweep's identity is every settings field marked `verdict`; each field marks itself."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kbx_ray.config import identity
from kbx_ray.records import sweep_folder
from kbx_ray.config.compose import load_config
from kbx_ray.config.structured import Config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import build_axes
from kbx_ray.records.sweep_folder import identity_key, sweep_id


def test_every_settings_field_is_marked_verdict_or_exempt():
    """A new field anywhere under Config (EvalConfig, SandboxConfig, EngineConfig, ...) fails here
    until it says whether it can change a verdict: `verdict(default)` or `exempt(default, why=)`."""
    assert identity.unmarked(Config) == [], (
        "mark these fields in their dataclass with kbx_ray.config.identity.verdict(...) or "
        "exempt(..., why=...)")
    for path, why in _exemptions(Config):
        assert len(why) > 10, path


def _exemptions(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for f in dataclasses.fields(cls):
        if identity.mark(f) == "exempt":
            out.append((prefix + f.name, f.metadata[identity.WHY]))
        elif identity.mark(f) == "walk":
            out += _exemptions(identity._field_type(cls, f), f"{prefix}{f.name}.")
    return out


def test_an_unmarked_field_is_found_and_counts_as_a_verdict_field():
    @dataclasses.dataclass
    class Inner:
        a: int = identity.verdict(1)
        b: int = identity.exempt(2, why="a cache size")
        c: int = 3  # a helper forgot to mark it

    @dataclasses.dataclass
    class Outer:
        inner: Inner = identity.walk(Inner)
        whole: Inner = identity.verdict(factory=Inner)
        noop: str = identity.verdict("actor", as_=lambda m: m == "noop")

    assert identity.unmarked(Outer) == ["inner.c"]
    assert identity.identity(Outer()) == {"inner.a": 1, "inner.c": 3, "whole.a": 1, "whole.b": 2,
                                          "whole.c": 3, "noop": False}
    with pytest.raises(ValueError):
        identity.exempt(1, why=" ")


def test_the_settings_the_old_list_lacked_are_in_the_identity():
    base = sweep_id(load_config([]))
    for changed in ("evaluation.fresh_sets=3", "evaluation.fresh_ratio=3.0",
                    "evaluation.timing_sets=3", "evaluation.secret_seeds=false",
                    "evaluation.unseen_cases=0", "evaluation.fresh_floor_us=50",
                    "evaluation.sandbox.network=true", "model.temperature=0.5"):
        assert sweep_id(load_config([changed])) != base, changed
    for same in ("evaluation.eval_budget_s=900", "evaluation.ref_cache_mb=1",
                 "engine.flush_every=2", "sink.wandb.mode=disabled", "sinks=[console]",
                 "evaluation.sandbox.memory_gb=8", "force_resume=true"):
        assert sweep_id(load_config([same])) == base, same
    cfg = load_config([])
    key = identity_key(cfg, build_axes(cfg))
    assert key["evaluation.fresh_sets"] == 2 and key["engine.mode"] is False
    assert "suite.include" not in key
    assert any(k.startswith("variants.method.one_shot.") for k in key)


def test_a_folder_recorded_otherwise_is_refused_in_one_line(tmp_path: Path):
    def key(cfg: Config) -> dict:
        return identity_key(cfg, build_axes(cfg))

    old = load_config([f"output_dir={tmp_path}", "sweep_id=mine"])
    folder = tmp_path / "mine"
    folder.mkdir()
    sweep_folder.write_folder(key(old), folder)
    sweep_folder.check_folder(key(old), folder)  # the same settings: a resume
    new = load_config([f"output_dir={tmp_path}", "sweep_id=mine", "evaluation.fresh_sets=3"])
    with pytest.raises(ConfigError) as e:
        sweep_folder.check_folder(key(new), folder)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and "evaluation.fresh_sets=2 -> 3" in msg
    assert "drop sweep_id=" in msg and "force_resume=true" in msg
    forced = load_config([f"output_dir={tmp_path}", "sweep_id=mine", "evaluation.fresh_sets=3",
                          "force_resume=true"])
    sweep_folder.check_folder(key(forced), folder, forced.force_resume)
    sweep_folder.write_folder(key(forced), folder, forced.force_resume)  # the settings it resumed
    #                                                                     with, recorded now
    assert json.loads((folder / "identity.json").read_text())["evaluation.fresh_sets"] == 3
