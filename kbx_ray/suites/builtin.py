"""Load the task suite from tasks/<category>/<name>/task.py into `Task` records.

Selection (`include`) accepts task ids, category folders or globs, so `suite.include=[activation,
math/exp, "fusion/*"]` works; a pattern that matches nothing is an error that names it.
"""
from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any

from kbx_ray.errors import SuiteError
from kbx_ray.suites.task_import import load_module, select_ids  # noqa: F401 - re-exported
from kbx_ray.types import CATEGORIES, Task

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "tasks"


def task_from_file(path: Path, root: Path) -> Task:
    rel = path.parent.relative_to(root)
    task_id = rel.as_posix()
    name = path.parent.name
    module = load_module(path)
    ref = getattr(module, name, None)
    problems = []
    if not callable(ref):
        problems.append(f"no reference function {name!r}")
    if getattr(module, "CATEGORY", None) not in CATEGORIES:
        problems.append(f"CATEGORY {getattr(module, 'CATEGORY', None)!r} is not one of {CATEGORIES}")
    if getattr(module, "LEVEL", None) not in (1, 2, 3, 4, 5):
        problems.append("LEVEL must be 1-5")
    cases = getattr(module, "CASES", None)
    if not cases or not all(isinstance(c, dict) and "name" in c for c in cases):
        problems.append("CASES must be a non-empty list of dicts with a 'name'")
    for attr in ("make_inputs", "cost"):
        if not callable(getattr(module, attr, None)):
            problems.append(f"no {attr}() function")
    if not (module.__doc__ or "").strip():
        problems.append("no module docstring")
    if problems:
        raise SuiteError(f"task {task_id}: " + "; ".join(problems))
    solution = path.parent / "solution.py"
    return Task(
        task_id=task_id, name=name, category=module.CATEGORY, level=int(module.LEVEL),
        description=inspect.cleandoc(module.__doc__), signature=f"{name}{inspect.signature(ref)}",
        reference_source=inspect.getsource(ref), path=str(path.resolve()),
        solution_path=str(solution.resolve()) if solution.exists() else "",
        cases=tuple(dict(c, small=bool(c.get("small", False))) for c in cases),
        task_hash=task_file_hash(path),
        mutates=tuple(getattr(module, "MUTATES", ())), random=bool(getattr(module, "RANDOM", False)),
    )


def task_file_hash(path: Path) -> str:
    """The task's version: its file, and the shared draw helpers it imports (kbx_ray/taskkit.py),
    so a change to how inputs are drawn is a new version of every task that draws through it."""
    data = path.read_bytes()
    if b"kbx_ray.taskkit" in data:
        data += (Path(__file__).parents[1] / "taskkit.py").read_bytes()
    return hashlib.sha256(data).hexdigest()[:16]


def load_suite(root: str | Path | None = None, include: list[str] | None = None,
               name: str = "kbx", skipped: dict[str, str] | None = None,
               options: dict[str, Any] | None = None) -> list[Task]:
    """The suite `name` at `root`: kbx is tasks/; others are adapted by kbx_ray/suites/ (with
    `options`, the config's suite.options). An external problem that cannot be built is skipped:
    its one-line reason goes to `skipped` (id -> reason) when given, else to the log; it never
    aborts the rest."""
    if name != "kbx":
        from kbx_ray.suites import load_external

        return load_external(name, root, include, skipped, options)
    root = Path(root or DEFAULT_ROOT).resolve()
    if not root.is_dir():
        raise SuiteError(f"suite folder {root} does not exist: set suite.path to a tasks/ folder")
    files = sorted(root.glob("*/*/task.py"))
    ids = [p.parent.relative_to(root).as_posix() for p in files]
    chosen = select_ids(ids, include)
    return [task_from_file(root / i / "task.py", root) for i in chosen]


def get_task(task_id: str, root: str | Path | None = None, name: str = "kbx",
             options: dict[str, Any] | None = None) -> Task:
    """One task, building no other (an external suite surveys only the problem named)."""
    skipped: dict[str, str] = {}
    tasks = load_suite(root, [task_id], name, skipped, options)
    if not tasks:
        why = skipped.get(task_id) or next(iter(skipped.values()), "no such task")
        raise SuiteError(f"task {task_id} cannot be built: {why}")
    return tasks[0]
