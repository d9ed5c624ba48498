"""kbx_ray/registry.py: one decorator registers a backend, a method, a sink or a suite format
from its own module.

A temporary module on sys.path stands for a contributor's new file: importing it is the whole
registration, and each entry is then used from config like the built-in ones: the backend and the
method build, the suite format loads tasks (`kbx tasks`), and a sweep over that suite with that
backend and method writes its rows to the new sink beside Parquet.
"""
from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbx_ray.cli import commands as cli
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.config.preflight import validate
from kbx_ray.llm.base import REGISTRY as BACKENDS
from kbx_ray.llm.base import GenParams, UnknownBackendError, build_backend
from kbx_ray.methods.base import REGISTRY as METHODS
from kbx_ray.methods.base import build_method, check_method
from kbx_ray.registry import MissingDependencyError, RegistryError, add_kind, register, registry
from kbx_ray.errors import SuiteError
from kbx_ray.suites.builtin import get_task, load_suite
from kbx_ray.types import EvalResult

SINKS, SUITES = registry("sink"), registry("suite")

PLUGIN = '''
from dataclasses import dataclass
from pathlib import Path

from kbx_ray.methods.base import PromptOptions, finish, first_prompt, options_of, step
from kbx_ray.prompting.prompts import Templates
from kbx_ray.registry import register
from kbx_ray.sinks.base import Sink
from kbx_ray.suites.builtin import get_task
from kbx_ray.suites.task_import import select_ids
from kbx_ray.suites import SuiteFormat
from kbx_ray.types import Generation


class Echo:
    name = "tmp_echo"

    def __init__(self, cfg):
        self.word = cfg.options.get("word", "hi")

    async def generate(self, messages, params):
        return Generation(text=f"{self.word} {params.seed} {len(messages)}", model=self.name)


@dataclass
class EchoOptions:
    word: str = "hi"


@register("backend", "tmp_echo", options=EchoOptions)
def build(cfg):
    return Echo(cfg)


@register("method", "tmp_twice", options=PromptOptions)
def twice(cfg):
    templates = Templates(getattr(cfg, "templates_dir", None))
    opts = options_of(cfg, PromptOptions)

    async def solve(task, generate, evaluate, pool=None):
        prompt = first_prompt(task, opts, templates, pool=pool)
        return finish([await step(task, generate, evaluate, prompt, 0, b) for b in (0, 1)])

    return solve


@register("backend", "tmp_needs_pkg", requires=("kbx_no_such_package",), extra="tmpextra")
def needs(cfg):
    raise AssertionError("never built: its dependency is missing")


class Rows(Sink):
    """Keeps what it is given, as a dashboard would show it."""

    def __init__(self, ctx):
        self.ctx, self.started, self.rows, self.closed = ctx, None, {}, False
        SEEN.append(self)

    def start(self, total_cells, resolved_config):
        self.started = (total_cells, resolved_config["sinks"])

    def write_generations(self, rows):
        self.rows.setdefault("generations", []).extend(rows)

    def write_evaluations(self, rows):
        self.rows.setdefault("evaluations", []).extend(rows)

    def close(self):
        self.closed = True


SEEN = []


@register("sink", "tmp_rows")
def rows(ctx):
    return Rows(ctx)


@register("sink", "tmp_sink_needs_pkg", requires=("kbx_no_such_package",))
def rows_needing(ctx):
    raise AssertionError("never built: its dependency is missing")


def _ids(root):
    ids = (Path(root) / "tasks.txt").read_text().split()
    return ids, ids


def _load(root, include, skipped):
    """A folder whose tasks.txt lists task ids of tasks/: the tasks it names, in its order."""
    return [get_task(i) for i in select_ids(_ids(root)[0], include)]


@register("suite", "tmp_list")
def listed():
    return SuiteFormat("a folder holding tasks.txt (task ids of tasks/)", _load, _ids)
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "kbx_tmp_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("kbx_tmp_plugin")
    sys.modules.pop("kbx_tmp_plugin", None)
    for reg, name in ((BACKENDS, "tmp_echo"), (BACKENDS, "tmp_needs_pkg"), (METHODS, "tmp_twice"),
                      (SINKS, "tmp_rows"), (SINKS, "tmp_sink_needs_pkg"), (SUITES, "tmp_list")):
        reg.pop(name, None)


def test_a_backend_from_a_new_module_is_built_from_config(plugin):
    assert "tmp_echo" in BACKENDS and "tmp_echo" in list(BACKENDS)
    b = build_backend(SimpleNamespace(name="m", backend="tmp_echo", options={"word": "yo"}))
    g = asyncio.run(b.generate([{"role": "user", "content": "x"}], GenParams(seed=7)))
    assert isinstance(b, plugin.Echo) and g.text == "yo 7 1"


def test_a_new_backend_checks_its_own_options_before_anything_starts(plugin):
    validate(load_config(["model.backend=tmp_echo", "model.options.word=yo"]))
    with pytest.raises(ConfigError, match=r"^unknown key model.options.wrd in model reference: did "
                       r"you mean model.options.word\?$"):
        validate(load_config(["model.backend=tmp_echo", "model.options.wrd=yo"]))
    with pytest.raises(ConfigError, match=r"^unknown key model.options.word in model reference: "
                       r"model.options takes no keys$"):  # a backend without options takes none
        validate(load_config(["model.options.word=yo"]))


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
    """A further extension point joins the same way: a kind names the package of its modules."""
    pkg = tmp_path / "kbx_tmp_sinks"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jsonl.py").write_text("from kbx_ray.registry import register\n\n\n"
                                  "@register('tmp_kind', 'jsonl')\ndef build(cfg):\n"
                                  "    return ('jsonl', cfg)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from kbx_ray import registry

    sinks = add_kind("tmp_kind", ("kbx_tmp_sinks",))
    try:
        assert list(sinks) == ["jsonl"] and sinks.build("jsonl", 3) == ("jsonl", 3)
    finally:
        registry.KINDS.pop("tmp_kind")
        for name in ("kbx_tmp_sinks.jsonl", "kbx_tmp_sinks"):
            sys.modules.pop(name, None)


def test_a_suite_format_from_a_new_module_loads_through_kbx_tasks(plugin, tmp_path: Path, capsys):
    (tmp_path / "tasks.txt").write_text("math/exp\nactivation/relu\n")
    assert [t.task_id for t in load_suite(tmp_path, None, "tmp_list")] == ["math/exp",
                                                                            "activation/relu"]
    args = ["tasks", "--json", "suite.name=tmp_list", f"suite.path={tmp_path}",
            "suite.include=[activation]"]
    assert cli.main(args) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == "activation/relu" and row["signature"].startswith("relu(")
    with pytest.raises(SuiteError, match=r"^suite=tmp_list needs suite.path=<folder>: a folder "
                       r"holding tasks.txt \(task ids of tasks/\)$"):
        load_suite(None, None, "tmp_list")
    with pytest.raises(SuiteError, match=r"^unknown suite 'nope': choose one of kbx, kernelbench, "
                       r"kernelbenchx, tmp_list \(suite=<name>\)$"):
        load_suite(tmp_path, None, "nope")


@pytest.fixture
def local_ray():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow  # starts a local Ray cluster
def test_a_sink_from_a_new_module_receives_a_sweeps_rows(plugin, local_ray, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture):
    """The new suite, backend and method run a sweep (engine.mode=noop: made-up verdicts), and the
    new sink gets every row that Parquet records, after it; a sink whose package is missing is
    left out with the install hint, and the sweep goes on."""
    from kbx_ray.orchestration import engine
    from kbx_ray.sinks import read_rows

    (tmp_path / "tasks.txt").write_text("activation/relu\nmath/exp\n")
    cfg = load_config([f"output_dir={tmp_path / 'results'}", "suite.name=tmp_list",
                       f"suite.path={tmp_path}", "model.name=echo", "model.backend=tmp_echo",
                       "method.name=twice", "method.kind=tmp_twice", "engine.mode=noop",
                       "sink.wandb.mode=disabled", "sinks=[tmp_sink_needs_pkg,tmp_rows]"])
    with caplog.at_level(logging.WARNING, logger="kbx_ray.sinks"):
        p = engine.run_sweep(cfg)
    (sink,) = plugin.SEEN
    assert sink.ctx.sweep_dir == p.sweep_dir and sink.ctx.sweep_id == p.sweep_id and sink.closed
    assert sink.started == (2, ["tmp_sink_needs_pkg", "tmp_rows"])
    for dataset in ("generations", "evaluations"):
        recorded = read_rows(p.sweep_dir, dataset)
        assert len(sink.rows[dataset]) == len(recorded) == 4  # 2 tasks x 2 branches
        assert {(r["cell_id"], r["candidate_id"]) for r in sink.rows[dataset]} == \
            {(r["cell_id"], r["candidate_id"]) for r in recorded}
    evals = sink.rows["evaluations"]
    assert {(r["task_id"], r["model"], r["method"]) for r in evals} == {
        ("activation/relu", "echo", "twice"), ("math/exp", "echo", "twice")}
    assert all(r["completion"].startswith("hi ") for r in sink.rows["generations"])  # the echo
    assert "sink 'tmp_sink_needs_pkg' needs kbx_no_such_package, which is not installed: pip " \
           "install kbx_no_such_package; the sweep goes on without it" in caplog.text
