"""The package's size bounds: every module under 300 lines, no function over 60 (a module that
outgrows its bound splits along a seam; a function, into named steps), and at most 8 modules at
kbx_ray/'s top level beside its packages (a new module goes into the package of its layer)."""
from __future__ import annotations

import ast
from pathlib import Path

import kbx_ray

ROOT = Path(kbx_ray.__file__).parent
MODULE_LINES, FUNCTION_LINES, TOP_LEVEL = 300, 60, 8


def too_long(path: Path, name: str) -> list[str]:
    """The module, if it reaches MODULE_LINES, and each of its functions over FUNCTION_LINES."""
    src = path.read_text()
    out = []
    if len(src.splitlines()) >= MODULE_LINES:
        out.append(f"{name}: {len(src.splitlines())} lines (bound {MODULE_LINES})")
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > FUNCTION_LINES:
                out.append(f"{name}:{node.lineno} {node.name}: {n} lines")
    return out


def test_every_module_is_under_its_bound_and_every_function_at_most_60() -> None:
    found = [line for path in sorted(ROOT.rglob("*.py"))
             for line in too_long(path, str(path.relative_to(ROOT.parent)))]
    assert not found, found


def test_the_check_catches_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    fits = tmp_path / "fits.py"
    fits.write_text("def f():\n" + "    x = 1\n" * (FUNCTION_LINES - 1) + "\n" * 200)
    assert too_long(fits, "fits") == []
    big = tmp_path / "big.py"
    big.write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES + "y = 2\n" * MODULE_LINES)
    assert too_long(big, "big") == [f"big: {MODULE_LINES + FUNCTION_LINES + 1} lines "
                                    f"(bound {MODULE_LINES})", f"big:1 f: {FUNCTION_LINES + 1} lines"]


def test_the_top_level_holds_at_most_8_modules_beside_the_packages() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    packages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    assert "__init__.py" in top and {"config", "orchestration", "records"} <= set(packages)
    assert len(top) <= TOP_LEVEL, f"{len(top)} modules in kbx_ray/ (at most {TOP_LEVEL}): {top}"
