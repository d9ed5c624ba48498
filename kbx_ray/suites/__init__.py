"""External suites: `suite=kernelbench` and `suite=kernelbenchx` with `suite.path=<folder>`.

Each adapter turns a folder of someone else's problems into `Task` records whose module is a
generated shim (shim.py), so a candidate goes through the very same evaluator (sandboxed worker,
trusted judge) as a task from tasks/. Adapters are imported lazily, by name.
"""
from __future__ import annotations

import importlib
import logging
from pathlib import Path

from kbx_ray.suite import SuiteError
from kbx_ray.types import Task

ADAPTERS = {
    "kernelbench": ("kbx_ray.suites.kernelbench",
                    "a KernelBench folder holding level1/, level2/, ..."),
    "kernelbenchx": ("kbx_ray.suites.kernelbenchx", "a KernelBench-X folder holding "
                     "kernelbenchx_v1.json and <Category>/<name>.py files"),
}
NAMES = ("kbx", *ADAPTERS)
log = logging.getLogger(__name__)


def load_external(name: str, root: str | Path | None, include: list[str] | None,
                  skipped: dict[str, str] | None = None) -> list[Task]:
    """The suite's tasks that build; the others go to `skipped` (id -> one-line reason), or, when
    it is None, to the log (and when none builds at all, to one error naming the first)."""
    if name not in ADAPTERS:
        raise SuiteError(f"unknown suite {name!r}: choose one of {', '.join(NAMES)} (suite=<name>)")
    module, what = ADAPTERS[name]
    if not root:
        raise SuiteError(f"suite={name} needs suite.path=<folder>: {what}")
    path = Path(root).expanduser().resolve()
    if not path.exists():
        raise SuiteError(f"suite.path {path} does not exist: set it to {what}")
    collected: dict[str, str] = {} if skipped is None else skipped
    tasks = importlib.import_module(module).load(path, include, collected)
    if skipped is None:
        for task_id, why in collected.items():
            log.warning("suite=%s: skipped %s: %s", name, task_id, why)
        if not tasks and collected:
            first, why = next(iter(collected.items()))
            raise SuiteError(f"no task of suite={name} could be built ({len(collected)} skipped; "
                             f"{first}: {why})")
    return tasks
