"""The package's size bounds: every module under 400 lines, every module of the evaluation
(kbx_ray/evaluate/) under 300, no function over 60 (a module that outgrows its bound splits along a
seam; a function, into named steps)."""
from __future__ import annotations

import ast
from pathlib import Path

import kbx_ray

ROOT = Path(kbx_ray.__file__).parent
MODULE_LINES, FUNCTION_LINES = 400, 60
BOUNDS = {ROOT / "evaluate": 300}  # tighter bounds by folder


def _bound(path: Path) -> int:
    return min([MODULE_LINES] + [n for d, n in BOUNDS.items() if d in path.parents])


def test_every_module_is_under_its_bound_and_every_function_at_most_60() -> None:
    too_long = []
    for path in sorted(ROOT.rglob("*.py")):
        src = path.read_text()
        name = path.relative_to(ROOT.parent)
        if len(src.splitlines()) >= _bound(path):
            too_long.append(f"{name}: {len(src.splitlines())} lines (bound {_bound(path)})")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {n} lines")
    assert not too_long, too_long


def test_the_evaluation_folder_has_the_tighter_bound() -> None:
    assert _bound(ROOT / "evaluate" / "worker" / "ledger.py") == 300
    assert _bound(ROOT / "evaluate" / "settings.py") == 300
    assert _bound(ROOT / "engine.py") == MODULE_LINES
