"""README.md says what is true: a rename or a CI change that leaves the guide behind fails here.

- It gives `.ci/run`'s lanes as they are: each lane's name and its exact pytest command.
- Every `kbx_ray/...`, `scripts/...`, `tests/...`, `conf/...` or `tasks/...` path it names exists
  (`{a,b}` expanded, globs match something; `<name>` templates and another tree's files skipped).
- Every `file.py:name` of its design section ("from scripts/sweep.py to a Parquet row") is defined
  in that file.
"""
from __future__ import annotations

import ast
import itertools
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DESIGN = README.split("## Design: from `scripts/sweep.py` to a Parquet row")[1].split("\n## ")[0]
# design-section paths are relative to the repository, kbx_ray/ or kbx_ray/evaluate/
BASES = (ROOT, ROOT / "kbx_ray", ROOT / "kbx_ray" / "evaluate")


def _expand(path: str) -> list[str]:
    """`a/{b,c}/d` -> [a/b/d, a/c/d]."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def named_paths(text: str) -> list[str]:
    # "KernelBench-X's `scripts/run_eval.sh`" is another tree's file: a possessive before it says so
    found = re.findall(r"(?<![\w./-])(?<!'s\s`)((?:kbx_ray|scripts|tests|conf|tasks)/"
                       r"[\w./*{},<>-]*[\w*}/])", text)
    return sorted({p for f in found if "<" not in f for p in _expand(f)})


def design_names(text: str) -> list[tuple[str, str | None]]:
    """(file, dotted name or None) of every `file.py` / `file.py:name` in backticks."""
    found = re.findall(r"`((?:[\w*]+/)*[\w*]+\.(?:py|md))(?::([\w.]+))?", text)
    return sorted({(f, n or None) for f, n in found if not f.startswith("..")})


def _defines(path: Path, dotted: str) -> bool:
    """Whether the module at `path` defines `dotted` (a function, class or assigned name, or a
    method or attribute of a class it defines)."""
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in dotted.split("."):
        node = next((n for n in scope if _binds(n, part)), None)
        if node is None:
            return False
        scope = getattr(node, "body", [])
    return True


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id == name for t in targets)


def test_the_patterns_see_what_they_should():
    text = ("see `kbx_ray/evaluate/{static,worker}/README.md`, scripts/bench/x.py. and "
            "`kbx_ray/llm/<name>.py`, not the peer's `scripts/run_eval.sh`")
    assert named_paths(text) == ["kbx_ray/evaluate/static/README.md",
                                 "kbx_ray/evaluate/worker/README.md", "scripts/bench/x.py"]
    assert design_names("`engine.py:run_sweep` -> `methods/*.py` (`../shared/DESIGN.md`)") == [
        ("engine.py", "run_sweep"), ("methods/*.py", None)]
    assert len(named_paths(README)) > 40 and len(design_names(DESIGN)) > 30


@pytest.mark.parametrize("path", named_paths(README))
def test_every_path_the_readme_names_exists(path):
    assert list(ROOT.glob(path.rstrip("/"))), f"README.md names {path}, which does not exist"


@pytest.mark.parametrize("file, name", design_names(DESIGN))
def test_the_design_section_names_current_files_and_functions(file, name):
    hits = [m for base in BASES for m in base.glob(file)]
    assert hits, f"README's design section names {file}, found under none of {BASES}"
    if name is not None:
        assert any(_defines(h, name) for h in hits), f"{file} defines no {name}"


def ci_lanes(script: str) -> list[tuple[str, str]]:
    """(name, its pytest command as the README spells it) of every `lane NAME ARGS...` line of
    .ci/run, continuation lines joined."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if len(words) > 1 and words[0] == "lane":
            args = [f'"{w}"' if " " in w else w for w in words[2:]]
            out.append((words[1], " ".join(["python -m pytest", *args])))
    return out


def test_the_readme_gives_every_ci_lane_and_its_command():
    lanes = ci_lanes((ROOT / ".ci" / "run").read_text())
    assert len(lanes) >= 2 and lanes[0][0] == "unit"
    flat = " ".join(README.split())
    for name, command in lanes:
        assert f"`{name}`: `{command}`" in flat, f"README.md lacks .ci/run's lane {name}: {command}"
    assert f"in {_COUNT.get(len(lanes), len(lanes))} lanes" in flat, "README.md miscounts the lanes"


_COUNT = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
