"""External suites: `suite=kernelbench` and `suite=kernelbenchx` with `suite.path=<folder>`.

Each adapter turns a folder of someone else's problems into `Task` records whose module is a
generated shim (shim.py), so a candidate goes through the very same evaluator (sandboxed worker,
trusted judge) as a task from tasks/. Adapters are imported lazily, by name.
"""
from __future__ import annotations

import importlib
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


def load_external(name: str, root: str | Path | None, include: list[str] | None) -> list[Task]:
    if name not in ADAPTERS:
        raise SuiteError(f"unknown suite {name!r}: choose one of {', '.join(NAMES)} (suite=<name>)")
    module, what = ADAPTERS[name]
    if not root:
        raise SuiteError(f"suite={name} needs suite.path=<folder>: {what}")
    path = Path(root).expanduser().resolve()
    if not path.exists():
        raise SuiteError(f"suite.path {path} does not exist: set it to {what}")
    return importlib.import_module(module).load(path, include)
