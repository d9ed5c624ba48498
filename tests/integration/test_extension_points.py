"""README's "Adding things", as a user outside the package does it: a backend that holds GPUs, a
method that runs rounds, a sink and a suite format, each one module in a temporary folder on
sys.path whose factory carries `@register(...)` with its capabilities and its typed options
(`options=`: model.options, method.options, sink.<name>, suite.options). Nothing in kbx_ray/ or
conf/ is touched, the engine treats them as it treats its own, and a bad option key of any of them
stops the sweep before it starts, in one line.
"""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from kbx_ray.orchestration import engine, scaling
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import build_axes, iter_cells
from kbx_ray.llm.base import generation_gpus
from kbx_ray.registry import registry
from kbx_ray.sinks import build_sinks, sink_options

MODULES = {
    "ext_gpu_backend": '''
        from dataclasses import dataclass, field

        from kbx_ray.registry import register
        from kbx_ray.types import Generation

        @dataclass
        class GpuOptions:
            replicas: int = 1

        @dataclass
        class Replicas:
            replicas: int
            gpus_per_replica: int = 2
            accelerator_type: str | None = "H100"
            resources: dict = field(default_factory=lambda: {"gen": 1.0})
            labels: dict = field(default_factory=dict)
            max_inflight: int = 8

        def placement(model):
            return Replicas(replicas=model.typed_options().replicas)

        class Echo:
            name = "ext_gpu"

            async def generate(self, messages, params):
                return Generation(text="no kernel", model=self.name)

        @register("backend", "ext_gpu", gpus=placement, options=GpuOptions)
        def build(cfg):
            return Echo()
    ''',
    "ext_rounds_method": '''
        from dataclasses import dataclass

        from kbx_ray.methods.base import PromptOptions, cached, finish, options_of
        from kbx_ray.methods.repair import run_chain
        from kbx_ray.prompting.prompts import Templates
        from kbx_ray.registry import register

        @dataclass
        class RefineOptions(PromptOptions):
            chains: int = 1  # independent repair chains

        @register("method", "ext_refine", runs_rounds=True, options=RefineOptions)
        def ext_refine(cfg):
            opts, templates = options_of(cfg, RefineOptions), Templates(cfg.templates_dir)

            async def solve(task, generate, evaluate, pool=None):
                ev = cached(evaluate)
                chains = [await run_chain(task, generate, ev, cfg, opts, templates, b, pool)
                          for b in range(opts.chains)]
                return finish([a for chain in chains for a in chain])

            return solve
    ''',
    "ext_sink": '''
        from dataclasses import dataclass

        from kbx_ray.registry import register
        from kbx_ray.sinks.base import Sink

        @dataclass
        class TallySettings:
            every: int = 1
            label: str = "tally"

        class Tally(Sink):
            def __init__(self, settings):
                self.settings, self.rows = settings, []

            def write_evaluations(self, rows):
                self.rows += rows

        @register("sink", "ext_tally", options=TallySettings)
        def build(ctx):
            return Tally(ctx.options)
    ''',
    "ext_suite": '''
        from dataclasses import dataclass, field
        from pathlib import Path

        from kbx_ray.registry import register
        from kbx_ray.suites.builtin import load_suite
        from kbx_ray.suites import SuiteFormat

        TASKS = str(Path(__file__).resolve().parent / "tasks")

        @dataclass
        class Selection:
            tasks: list[str] = field(default_factory=lambda: ["math/exp"])  # when no include

        def ids(root):
            ids = sorted(p.parent.relative_to(root).as_posix() for p in root.glob("*/*/task.py"))
            return ids, ids

        @register("suite", "ext_suite", options=Selection)
        def fmt(opts):
            def load(root, include, skipped):
                return load_suite(root, include or opts.tasks)

            return SuiteFormat("a folder of kbx tasks", load, ids)
    ''',
}


@pytest.fixture()
def extensions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in MODULES:
        importlib.import_module(name)  # its decorator is the whole registration
    yield tmp_path
    for kind, name in (("backend", "ext_gpu"), ("method", "ext_refine"), ("sink", "ext_tally"),
                       ("suite", "ext_suite")):
        del registry(kind)[name]
    for name in MODULES:
        sys.modules.pop(name, None)


def overrides(tmp_path: Path) -> list[str]:
    from kbx_ray.suites.builtin import DEFAULT_ROOT

    return [f"output_dir={tmp_path / 'results'}", "suite.name=ext_suite",
            f"suite.path={DEFAULT_ROOT}", "suite.options.tasks=[activation/relu]",
            "model.backend=ext_gpu", "model.name=ext", "model.options.replicas=3",
            "method.name=ext_refine", "method.options.chains=2", "sweep.rounds=[0,2]",
            "sinks=[console,ext_tally]", "sink.ext_tally.every=5", "sink.wandb.mode=disabled"]


def test_a_dry_run_plans_with_every_extension(extensions: Path) -> None:
    cfg = load_config(overrides(extensions))
    p = engine.plan(cfg)
    assert list(p.tasks) == ["activation/relu"]  # through the registered format and its option
    assert [m.typed_options().chains for m in p.axes.methods] == [2, 2]
    # the rounds axis multiplies the method that declared runs_rounds, as it does repair
    assert [(m.name, m.rounds) for m in build_axes(cfg).methods] == [("ext_refine@R0", 0),
                                                          ("ext_refine@R2", 2)]
    assert {c.method.name for c in iter_cells(p.axes, list(p.tasks.values()), ["cpu"])} == {
        "ext_refine@R0", "ext_refine@R2"}
    assert p.n_cells == 2 and "ext_refine@R2" in engine.describe(p)


def test_a_backend_that_holds_gpus_is_counted_and_placed(extensions: Path) -> None:
    model = load_config(overrides(extensions)).model
    assert generation_gpus(model) == 3 * 2
    assert generation_gpus(model, "A100") == 0  # its replicas land on H100s only
    assert scaling.replica_slots([model]) == 3 * 8
    demand = scaling.generation_demand([model])
    assert len(demand.bundles) == 6 and all(b["GPU"] == 1.0 and b["gen"] == 1.0
                                            for b in demand.bundles)


def test_a_sink_gets_its_own_typed_settings(extensions: Path, tmp_path: Path) -> None:
    cfg = load_config(overrides(extensions))
    fan = build_sinks(tmp_path / "sweep", "sid", sink_options(cfg.sinks, cfg.sink))
    tally = next(s for s in fan.sinks if type(s).__name__ == "Tally")
    assert tally.settings.every == 5 and tally.settings.label == "tally"
    bad = load_config([*overrides(extensions), "sink.ext_tally.evry=2"])
    with pytest.raises(ConfigError, match=r"^unknown key sink.ext_tally.evry in sink ext_tally: did "
                       r"you mean sink.ext_tally.every\?$"):
        engine.plan(bad)


@pytest.mark.parametrize("bad, line", [
    ("model.options.replica=2", "unknown key model.options.replica in model ext: did you mean "
     "model.options.replicas?"),
    ("method.options.chain=2", "unknown key method.options.chain in method ext_refine@R0: did you "
     "mean method.options.chains?"),
    ("sink.ext_tally.evry=2", "unknown key sink.ext_tally.evry in sink ext_tally: did you mean "
     "sink.ext_tally.every?"),
    ("suite.options.task=[math/exp]", "unknown key suite.options.task in suite ext_suite: did you "
     "mean suite.options.tasks?"),
    ("model.options.replicas=many", "bad config in model ext: model.options.replicas: Value 'many' "
     "of type 'str' could not be converted to Integer"),
])
def test_a_bad_option_of_any_kind_stops_the_sweep_in_one_line(extensions: Path, bad: str,
                                                               line: str) -> None:
    cfg = load_config([*overrides(extensions), bad])  # each kind's options are typed by its own
    with pytest.raises(ConfigError) as e:             # dataclass before anything starts
        engine.plan(cfg)
    assert str(e.value) == line
