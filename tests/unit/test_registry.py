"""kbx_ray/registry.py: one decorator registers a backend or a method from its own module.

A temporary module on sys.path stands for a contributor's new file: importing it is the whole
registration, and the backend and method are then built from config like the built-in ones.
"""
from __future__ import annotations

import asyncio
import dataclasses
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbx_ray.config import ConfigError, load_config
from kbx_ray.llm.base import REGISTRY as BACKENDS
from kbx_ray.llm.base import GenParams, UnknownBackendError, build_backend
from kbx_ray.methods.base import REGISTRY as METHODS
from kbx_ray.methods.base import build_method, check_method
from kbx_ray.registry import MissingDependencyError, RegistryError, add_kind, register
from kbx_ray.suite import get_task
from kbx_ray.types import EvalResult

PLUGIN = '''
from kbx_ray.methods.base import finish, first_prompt, step
from kbx_ray.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.types import Generation


class Echo:
    name = "tmp_echo"

    def __init__(self, cfg):
        self.word = cfg.options.get("word", "hi")

    async def generate(self, messages, params):
        return Generation(text=f"{self.word} {params.seed} {len(messages)}", model=self.name)


@register("backend", "tmp_echo")
def build(cfg):
    return Echo(cfg)


@register("method", "tmp_twice")
def twice(cfg):
    templates = Templates(getattr(cfg, "templates_dir", None))

    async def solve(task, generate, evaluate, pool=None):
        prompt = first_prompt(task, cfg, templates, pool=pool)
        return finish([await step(task, generate, evaluate, prompt, 0, b) for b in (0, 1)])

    return solve


@register("backend", "tmp_needs_pkg", requires=("kbx_no_such_package",), extra="tmpextra")
def needs(cfg):
    raise AssertionError("never built: its dependency is missing")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "kbx_tmp_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("kbx_tmp_plugin")
    sys.modules.pop("kbx_tmp_plugin", None)
    for reg, name in ((BACKENDS, "tmp_echo"), (BACKENDS, "tmp_needs_pkg"), (METHODS, "tmp_twice")):
        reg.pop(name, None)


def test_a_backend_from_a_new_module_is_built_from_config(plugin):
    assert "tmp_echo" in BACKENDS and "tmp_echo" in list(BACKENDS)
    b = build_backend(SimpleNamespace(name="m", backend="tmp_echo", options={"word": "yo"}))
    g = asyncio.run(b.generate([{"role": "user", "content": "x"}], GenParams(seed=7)))
    assert isinstance(b, plugin.Echo) and g.text == "yo 7 1"


def test_a_method_from_a_new_module_runs_like_the_built_in_ones(plugin):
    cfg = dataclasses.replace(load_config(["method=one_shot"]).method, name="twice", kind="tmp_twice")
    assert check_method(cfg) is None
    task = get_task("activation/relu")
    seen: list[int] = []

    async def generate(prompt, rnd, branch=0):
        seen.append(branch)
        return await build_backend(SimpleNamespace(name="m", backend="tmp_echo", options={})) \
            .generate(prompt.messages, GenParams(seed=branch))

    async def evaluate(cand):
        return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id)

    attempts = asyncio.run(build_method(cfg)(task, generate, evaluate))
    assert seen == [0, 1] and [a.branch for a in attempts] == [0, 1]
    assert sum(a.final for a in attempts) == 1
    assert attempts[0].candidate.error_kind == "no_code_block"


def test_a_missing_optional_dependency_is_one_line_with_the_install_hint(plugin):
    with pytest.raises(ConfigError) as e:
        build_backend(SimpleNamespace(name="m", backend="tmp_needs_pkg", options={}))
    assert str(e.value) == ("model m: backend 'tmp_needs_pkg' needs kbx_no_such_package, which is "
                            "not installed: pip install 'kbx_ray[tmpextra]'")
    with pytest.raises(MissingDependencyError):
        BACKENDS.entry("tmp_needs_pkg").factory()


def test_unknown_names_list_the_registered_ones():
    with pytest.raises(UnknownBackendError, match=r"unknown model backend 'nope': choose one of "
                       r"mutants, openai, reference, replay, vllm"):
        build_backend(SimpleNamespace(name="m", backend="nope"))
    cfg = dataclasses.replace(load_config(["method=one_shot"]).method, kind="nope")
    assert check_method(cfg).startswith("unknown method 'nope': choose one of agentic, best_of_n, ")


def test_one_name_registered_by_two_modules_is_refused(plugin):
    with pytest.raises(RegistryError, match="backend 'tmp_echo' is registered twice"):
        register("backend", "tmp_echo")(lambda cfg: None)


def test_a_new_kind_discovers_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Sinks and suite formats join the same way: a kind names the package of its modules."""
    pkg = tmp_path / "kbx_tmp_sinks"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jsonl.py").write_text("from kbx_ray.registry import register\n\n\n"
                                  "@register('tmp_sink', 'jsonl')\ndef build(cfg):\n"
                                  "    return ('jsonl', cfg)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from kbx_ray import registry

    sinks = add_kind("tmp_sink", ("kbx_tmp_sinks",))
    try:
        assert list(sinks) == ["jsonl"] and sinks.build("jsonl", 3) == ("jsonl", 3)
    finally:
        registry.KINDS.pop("tmp_sink")
        for name in ("kbx_tmp_sinks.jsonl", "kbx_tmp_sinks"):
            sys.modules.pop(name, None)
