"""kbx_ray/'s prose stays short and current: a module docstring is at most 8 lines (a module's
details go to its package's README.md, or evaluate/INTEGRITY.md), and no source names an issue,
stop or incident by number (history belongs in commit messages)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC_LINES = 8
HISTORY = re.compile(r"\b(?:issues?|stops?|incidents?) #?\d+", re.I)


def docstring_lines(src: str) -> int:
    """The lines the module's docstring spans, quotes included (0 without one)."""
    body = ast.parse(src).body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def history(src: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(src)]


def _sources() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / "kbx_ray").rglob("*.py"))]


def test_every_module_docstring_is_at_most_8_lines() -> None:
    long = [f"{rel}: {n} lines" for rel, src in _sources()
            if (n := docstring_lines(src)) > DOC_LINES]
    assert not long, ("module docstrings over 8 lines (move the details to the package's "
                      "README.md):\n" + "\n".join(long))


def test_no_source_names_an_issue_or_incident_by_number() -> None:
    found = [f"{rel}:{src.count(chr(10), 0, src.find(h)) + 1}: {h}" for rel, src in _sources()
             for h in history(src)]
    assert not found, "history in the code (say it in the commit message):\n" + "\n".join(found)


def test_the_checks_catch_what_they_are_for() -> None:
    nine = '"""One.\n' + "more\n" * 7 + '"""\nx = 1\n'
    assert docstring_lines(nine) == 9 and docstring_lines('"""One."""\n') == 1
    assert docstring_lines("x = 1\n") == 0 and docstring_lines("") == 0
    assert history("# as issue 36 asked; stop 35; Issue #4, incidents 3") == [
        "issue 36", "stop 35", "Issue #4", "incidents 3"]
    assert history("color: #888; a 35 stop budget; nonstop 3x; issues with it") == []
