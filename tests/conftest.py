"""Shared fixtures. GPU tests carry the `gpu` marker and are skipped without CUDA."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.prompting.extract import candidate_id
from kbx_ray.types import Candidate

FIXTURES = Path(__file__).parent / "fixtures"


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def make_candidate(task_id: str, entry: str, code: str) -> Candidate:
    return Candidate(candidate_id(task_id, code), task_id, code, entry)


@pytest.fixture()
def static_off(monkeypatch):
    """The evaluator with its static layer switched off (kernels are still found), so that what
    follows tests the runtime layers, the replay or the parent alone."""
    from kbx_ray.evaluate.parent import evaluator as evaluator_mod
    from kbx_ray.evaluate.static import checks

    def permissive(tree, entry):
        rep = checks.static_check(tree, entry)
        rep.violations = []
        return rep

    monkeypatch.setattr(evaluator_mod, "static_check", permissive)


@pytest.fixture(scope="session")
def fast_timeout_evaluator():
    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=5, load_timeout_s=120))
    yield ev
    ev.close()


@pytest.fixture(scope="session")
def cpu_evaluator():
    # Generous limits: a loaded 2-core CI box runs the interpreter slowly; hangs have their own test.
    ev = Evaluator(EvalConfig(device="cpu", case_timeout_s=180, load_timeout_s=180))
    yield ev
    ev.close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under `-n N --dist loadscope`: a module, or modules sharing a vLLM engine or server, per
    worker; short tests one by one (tests/fixtures/xdist_groups.py)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from fixtures.xdist_groups import scheduler

    return scheduler(config, log)
