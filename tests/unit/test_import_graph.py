"""kbx_ray/ has no import cycle: every module's imports, function-level ones included, are parsed
(no module is imported), with the package `__init__` each import runs first, and any strongly
connected group of modules fails the test, named with one cycle through it. The sandbox worker's
modules (kbx_ray/evaluate/worker/) reach nothing of the trusted parent's or the static checks';
what both sides import (evaluate/common/) reaches neither side, and the config reaches no side.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kbx_ray"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The module of kbx_ray that `name` (a module, or a name inside one) is."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every kbx_ray module `module` imports, at any depth of its code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_target(a.name, known) for a in node.names if a.name.startswith("kbx_ray"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.startswith("kbx_ray"):
                found.update(_target(f"{base}.{a.name}", known) for a in node.names)
    found.discard(None)
    # importing kbx_ray.a.b first runs kbx_ray/a/__init__.py, unless `module` is inside kbx_ray.a
    # already (then that package is initialised before it)
    inside = {module.rsplit(".", n)[0] for n in range(module.count(".") + 1)}
    for target in list(found):
        parts = str(target).split(".")
        found.update(p for p in (".".join(parts[:i]) for i in range(2, len(parts)))
                     if p in known and p not in inside)
    found.discard(module)
    return found  # type: ignore[return-value]


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imports(m, p, known) for m, p in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(g):
        if v not in index:
            visit(v)
    return [_one_cycle(g, grp) for grp in groups]


def _one_cycle(g: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, within the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & group):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return sorted(group)


def test_kbx_ray_has_no_import_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def reached(g: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, at any depth."""
    seen, todo = set(), [start]
    while todo:
        for w in g[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def _unreached(prefix: str, banned: tuple[str, ...]) -> None:
    g = graph()
    starts = [m for m in g if m.startswith(prefix)]
    assert len(starts) > 3, starts
    for start in starts:
        bad = sorted(m for m in reached(g, start) if m.startswith(banned))
        assert not bad, (start, bad)


def test_the_worker_reaches_nothing_of_the_parent_or_the_static_checks() -> None:
    """What runs beside the candidate (worker/) imports, at any depth, no module of parent/ or
    static/: they run only in the trusted parent."""
    _unreached("kbx_ray.evaluate.worker", ("kbx_ray.evaluate.parent", "kbx_ray.evaluate.static"))


def test_what_both_sides_import_reaches_neither_side() -> None:
    """parent/ and worker/ may import common/; common/ imports none of parent/, worker/, static/."""
    _unreached("kbx_ray.evaluate.common", ("kbx_ray.evaluate.parent", "kbx_ray.evaluate.worker",
                                           "kbx_ray.evaluate.static"))
    g = graph()
    assert "kbx_ray.evaluate.common.timing" in g["kbx_ray.evaluate.worker.main"]
    assert "kbx_ray.evaluate.common.inputs" in g["kbx_ray.evaluate.parent.reference_cache"]


@pytest.mark.slow  # starts a fresh interpreter
def test_loading_the_evaluation_settings_imports_no_side_and_no_torch() -> None:
    """A config load imports `evaluate/settings.py`: it must not start the sandbox's or the
    worker's modules (nor torch), so it is checked in a fresh interpreter's `sys.modules`."""
    code = ("import json, sys; import kbx_ray.evaluate.settings as s; s.EvalConfig(); "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "kbx_ray.evaluate.settings" in loaded
    bad = [m for m in loaded if m.startswith(("kbx_ray.evaluate.parent", "kbx_ray.evaluate.worker",
                                              "kbx_ray.evaluate.static", "torch"))]
    assert not bad, bad


def test_the_checker_finds_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    pkg = tmp_path / "kbx_ray"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from kbx_ray.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text("def f():\n    from kbx_ray.a import x\n")
    (pkg / "leaf.py").write_text("import kbx_ray.sub.c\n")
    assert cycles(graph(pkg)) == [["kbx_ray.a", "kbx_ray.sub.b", "kbx_ray.sub.c", "kbx_ray.a"]]


def test_the_checker_counts_the_package_init_that_an_import_runs(tmp_path: Path) -> None:
    pkg = tmp_path / "kbx_ray"
    (pkg / "sinks").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sinks" / "__init__.py").write_text("from kbx_ray.conf import Config\n")
    (pkg / "sinks" / "settings.py").write_text("")
    (pkg / "sinks" / "other.py").write_text("from kbx_ray.sinks import settings\n")
    (pkg / "conf.py").write_text("from kbx_ray.sinks.settings import S\n")
    assert cycles(graph(pkg)) == [["kbx_ray.conf", "kbx_ray.sinks", "kbx_ray.conf"]]


def test_a_module_importing_a_name_of_its_own_package_init_is_a_cycle(tmp_path: Path) -> None:
    """report/__init__.py imports render; render taking a name that __init__ defines (or re-exports)
    needs __init__ finished first: a cycle. Taking a sibling module (`from kbx_ray.report import
    figures`) runs no __init__ (the package is already being initialised): no edge, no cycle."""
    pkg = tmp_path / "kbx_ray"
    (pkg / "report").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("from kbx_ray.report.render import build\nX = 1\n")
    (pkg / "report" / "figures.py").write_text("")
    (pkg / "report" / "render.py").write_text("from kbx_ray.report import figures\n")
    assert cycles(graph(pkg)) == []
    (pkg / "report" / "render.py").write_text("from kbx_ray.report import figures, X\n")
    assert cycles(graph(pkg)) == [["kbx_ray.report", "kbx_ray.report.render", "kbx_ray.report"]]


def test_the_layer_packages_init_imports_nothing() -> None:
    """The packages the top level was grouped into hold only a docstring in __init__.py: a module
    is imported by its own path, and no package __init__ can be part of a cycle."""
    for name in ("cases", "cli", "config", "orchestration", "prompting", "records"):
        tree = ast.parse((PACKAGE / name / "__init__.py").read_text())
        assert not [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], name


def test_the_shared_errors_module_imports_nothing_of_kbx_ray() -> None:
    g = graph()
    for leaf in ("kbx_ray.errors", "kbx_ray.config.identity", "kbx_ray.suites.task_import"):
        assert g[leaf] <= {"kbx_ray.errors"}, (leaf, g[leaf])
