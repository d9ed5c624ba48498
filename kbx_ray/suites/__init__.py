"""External suites: `suite=kernelbench` and `suite=kernelbenchx` with `suite.path=<folder>`.

Each format turns a folder of someone else's problems into `Task` records whose module is a
generated shim (shim.py), judged by the same evaluator as tasks/. A format is one module here whose
factory carries `@register("suite", name, options=...)` and returns a `SuiteFormat` for its typed
options (`suite.options.*`), plus its conf/suite/<name>.yaml.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from kbx_ray.registry import MissingDependencyError, registry
from kbx_ray.errors import SuiteError
from kbx_ray.types import Task

BUILT_IN = "kbx"  # tasks/, loaded by kbx_ray/suites/builtin.py itself
log = logging.getLogger(__name__)

Load = Callable[[Path, Optional[list[str]], Optional[dict[str, str]]], list[Task]]


@dataclass(frozen=True)
class SuiteFormat:
    """What a suite format registers."""

    what: str
    """The folder suite.path must name, as error messages say it ("a KernelBench folder ...")."""
    load: Load
    """(root, include, skipped) -> the selected tasks that build; the others go to `skipped`."""
    ids: Callable[[Path], tuple[list[str], list[str]]] | None = None
    """root -> (the listed task ids, every id `load` accepts), without building a task; None when
    the format cannot list them cheaply (a replayed sweep then covers the grid as given)."""


def suite_format(name: str, options: Mapping[str, Any] | None = None) -> SuiteFormat:
    """The format `name` built for `options` (`suite.options`), typed by the dataclass it
    registered; a format that registered none takes none, and its factory no argument."""
    from kbx_ray.config.schema import NoOptions, typed

    formats = registry("suite")
    if name not in formats:
        raise SuiteError(f"unknown suite {name!r}: choose one of "
                         f"{', '.join((BUILT_IN, *formats))} (suite=<name>)")
    schema = formats.entry(name).options
    opts = typed(schema or NoOptions, dict(options or {}), "suite.options.", f"suite {name}")
    try:
        return formats.build(name, opts) if schema is not None else formats.build(name)
    except MissingDependencyError as e:
        raise SuiteError(str(e)) from None


def load_external(name: str, root: str | Path | None, include: list[str] | None,
                  skipped: dict[str, str] | None = None,
                  options: Mapping[str, Any] | None = None) -> list[Task]:
    """The suite's tasks that build; the others go to `skipped` (id -> one-line reason), or, when
    it is None, to the log (and when none builds at all, to one error naming the first)."""
    fmt = suite_format(name, options)
    if not root:
        raise SuiteError(f"suite={name} needs suite.path=<folder>: {fmt.what}")
    path = Path(root).expanduser().resolve()
    if not path.exists():
        raise SuiteError(f"suite.path {path} does not exist: set it to {fmt.what}")
    collected: dict[str, str] = {} if skipped is None else skipped
    tasks = fmt.load(path, include, collected)
    if skipped is None:
        for task_id, why in collected.items():
            log.warning("suite=%s: skipped %s: %s", name, task_id, why)
        if not tasks and collected:
            first, why = next(iter(collected.items()))
            raise SuiteError(f"no task of suite={name} could be built ({len(collected)} skipped; "
                             f"{first}: {why})")
    return tasks
