"""Issue 30's bound on the package: every module under 400 lines, no function over 60 (a module
that outgrows it splits along a seam; a function, into named steps)."""
from __future__ import annotations

import ast
from pathlib import Path

import kbx_ray

ROOT = Path(kbx_ray.__file__).parent
MODULE_LINES, FUNCTION_LINES = 400, 60


def test_every_module_is_under_400_lines_and_every_function_at_most_60() -> None:
    too_long = []
    for path in sorted(ROOT.rglob("*.py")):
        src = path.read_text()
        name = path.relative_to(ROOT.parent)
        if len(src.splitlines()) >= MODULE_LINES:
            too_long.append(f"{name}: {len(src.splitlines())} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {n} lines")
    assert not too_long, too_long

