"""Every task's small cases exercise every branch and every path of its reference.

A kernel is judged only on the cases it is run on: a branch of the reference that no case takes
(sgd's weight decay without momentum, say) is a branch a candidate may skip and still pass. So the
reference (the function named like the task, and the helpers it calls in its own file) is run
under coverage.py on every small case (seed 0, on the CPU, as the interpreter mode judges), and:

- branch coverage: every branch arc that coverage.py finds in those functions, and in `make_inputs`
  and its helpers (an input variant such as NaNs or a strided view that only a large case draws is
  never judged on the CPU), is taken by some case;
- path coverage: every combination of the reference's own `if` decisions (outside loops, nested
  ones only under the outcome that reaches them) is taken by some case, so a kernel that skips
  weight decay only where neither nesterov nor first_step is set fails too.

Only small cases count: they are the ones the CPU judges, so a branch covered only by a large case
would go unjudged in interpreter mode. A branch that is unreachable by design is marked on its
line with coverage.py's own `# pragma: no branch` followed by the reason (the reason is required);
the marked decision then also drops out of the path enumeration.

The drawing helpers that task files share (`kbx_ray.taskkit`) branch on a case's views and its
outlier flag outside the task file, so for them the input variants are compared instead: every
view and outlier setting that a large case draws, some small case draws too.
"""
from __future__ import annotations

import ast
import itertools
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import coverage
import pytest
import torch

from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import Task

TASKS = load_suite()
PRAGMA = re.compile(r"#\s*pragma:\s*no\s*(branch|cover)\b(.*)$")
Outcomes = frozenset  # a path: the set of (decision line, taken) pairs of one call


@dataclass
class Measured:
    """One task's reference under its small cases."""
    missing_branches: list[tuple[int, int]]
    executed_branches: list[tuple[int, int]]
    paths_needed: set[Outcomes]
    paths_taken: dict[Outcomes, list[str]]
    bad_pragmas: list[int]


def _functions(tree: ast.Module, name: str) -> list[ast.FunctionDef]:
    """The reference and the same-file helpers it calls (transitively)."""
    top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    want, todo = [], [name]
    while todo:
        fn = top[todo.pop()]
        if fn in want:
            continue
        want.append(fn)
        todo += [n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id in top]
    return want


def _paths(stmts: list[ast.stmt], skip: set[int]) -> set[Outcomes]:
    """Every combination of `if` outcomes through a statement list (loop bodies are left to branch
    coverage: their iterations take both outcomes)."""
    out: set[Outcomes] = {frozenset()}
    for s in stmts:
        if isinstance(s, ast.If) and s.lineno not in skip:
            alts = {p | {(s.lineno, True)} for p in _paths(s.body, skip)}
            alts |= {p | {(s.lineno, False)} for p in _paths(s.orelse, skip)}
        elif isinstance(s, ast.If):
            alts = _paths(s.body, skip) | _paths(s.orelse, skip)
        elif isinstance(s, (ast.With, ast.Try)):
            alts = _paths(s.body, skip)
        else:
            continue
        out = {a | b for a, b in itertools.product(out, alts)}
    return out


def _decisions(fn: ast.FunctionDef, skip: set[int]) -> dict[int, int]:
    """Decision line -> first line of its `True` body, for the ifs that paths are built from."""
    found: dict[int, int] = {}

    def walk(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                if s.lineno not in skip:
                    found[s.lineno] = s.body[0].lineno
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, (ast.With, ast.Try)):
                walk(s.body)
    walk(fn.body)
    return found


def measure(task: Task, tmp: Path) -> Measured:
    mod = load_module(task.path)
    src = Path(task.path).read_text()
    tree = ast.parse(src)
    funcs = _functions(tree, task.name)
    lines = src.splitlines()
    spans = [(f.lineno, f.end_lineno or f.lineno) for f in funcs + _functions(tree, "make_inputs")]
    inside = lambda ln: any(a <= ln <= b for a, b in spans)  # noqa: E731
    pragmas = {i + 1: m for i, ln in enumerate(lines) if (m := PRAGMA.search(ln)) and inside(i + 1)}
    bad = [ln for ln, m in pragmas.items() if len(m.group(2).strip(" -:()")) < 10]
    skip = set(pragmas)
    ref = getattr(mod, task.name)
    cov = coverage.Coverage(branch=True, data_file=None, include=[task.path])
    cov.start()
    try:
        for case in (c for c in task.cases if c["small"]):
            cov.switch_context(case["name"])
            args, kwargs = mod.make_inputs(case, 0, "cpu")
            with torch.no_grad():
                ref(*args, **kwargs)
    finally:
        cov.stop()
    cov.json_report(outfile=str(tmp / "cov.json"), include=[task.path])
    (info,) = json.loads((tmp / "cov.json").read_text())["files"].values()
    by_line = cov.get_data().contexts_by_lineno(task.path)
    decisions = _decisions(funcs[0], skip)
    taken: dict[Outcomes, list[str]] = {}
    for case in (c["name"] for c in task.cases if c["small"]):
        reached = [d for d in decisions if case in by_line.get(d, [])]
        path = frozenset((d, case in by_line.get(decisions[d], [])) for d in reached)
        taken.setdefault(path, []).append(case)
    return Measured(
        missing_branches=[tuple(b) for b in info["missing_branches"] if inside(b[0])],
        executed_branches=[tuple(b) for b in info["executed_branches"] if inside(b[0])],
        paths_needed=_paths(funcs[0].body, skip), paths_taken=taken, bad_pragmas=bad)


def _show(path: Outcomes, src: list[str]) -> str:
    return ", ".join(f"line {ln} `{src[ln - 1].strip()}` {'taken' if t else 'not taken'}" for ln, t in sorted(path))


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_small_cases_cover_every_branch_and_path_of_the_reference(task: Task, tmp_path: Path) -> None:
    m = measure(task, tmp_path)
    src = Path(task.path).read_text().splitlines()
    assert not m.bad_pragmas, (f"{task.task_id}: `# pragma: no branch` without a reason on line(s) "
                               f"{m.bad_pragmas}: say why the branch is unreachable after the pragma")
    for a, b in m.missing_branches:
        where = "the function's exit" if b < 0 else f"line {b}"
        pytest.fail(f"{task.task_id}: no small case takes the branch from line {a} "
                    f"(`{src[a - 1].strip()}`) to {where}: add a small case that does")
    missing = sorted(sorted(p) for p in m.paths_needed if p not in m.paths_taken)
    more = f" (and {len(missing) - 1} more paths)" if len(missing) > 1 else ""
    assert not missing, (f"{task.task_id}: no small case takes the path {_show(frozenset(missing[0]), src)}"
                         f"{more}: add a small case for it")


def variants(case: dict) -> set[tuple[str, object]]:
    """The input variants `kbx_ray.taskkit` draws for a case: each operand's view, and outliers."""
    views = case.get("views", [case.get("view")])
    return {("view", v) for v in views} | {("outliers", bool(case.get("outliers")))}


def missing_variants(task: Task) -> set[tuple[str, object]]:
    """Variants a large case draws and no small case does (the shared helpers' untaken branches)."""
    small = set().union(*(variants(c) for c in task.cases if c["small"]))
    return set().union(*(variants(c) for c in task.cases if not c["small"])) - small


KIT_USERS = [t for t in TASKS if "from kbx_ray.taskkit import" in Path(t.path).read_text()]


@pytest.mark.parametrize("task", KIT_USERS, ids=[t.task_id for t in KIT_USERS])
def test_small_cases_draw_every_variant_of_the_shared_helpers(task: Task) -> None:
    missing = sorted(missing_variants(task), key=str)
    assert not missing, f"{task.task_id}: only large cases draw {missing}: add a small case that does"


def test_a_variant_only_a_large_case_draws_is_reported() -> None:
    """Without elu's small transposed case the transposed view is drawn by a large case alone."""
    task = next(t for t in TASKS if t.task_id == "activation/elu")
    assert task in KIT_USERS and not missing_variants(task)
    only = replace(task, cases=tuple(c for c in task.cases if not (c["small"] and c.get("view") == "t")))
    assert missing_variants(only) == {("view", "t")}


def test_path_enumeration_follows_nesting(tmp_path: Path) -> None:
    """sgd: weight decay x (no momentum | momentum x first_step x nesterov) = 2 x (1 + 4) paths, and
    a case is mapped to the path it took (the plain momentum case takes no weight decay, momentum,
    no first step, no nesterov)."""
    task = next(t for t in TASKS if t.task_id == "optimizer/sgd")
    m = measure(task, tmp_path)
    (ref,) = _functions(ast.parse(Path(task.path).read_text()), "sgd")
    in_ref = [b for b in m.executed_branches if ref.lineno <= b[0] <= ref.end_lineno]
    assert len(m.paths_needed) == 10 and len(in_ref) == 8  # 4 ifs x 2 arcs
    assert len(m.executed_branches) == 10  # and make_inputs' `if case.get("outliers")`
    (plain,) = [p for p, cases in m.paths_taken.items() if "momentum_small" in cases]
    assert sorted(t for _, t in sorted(plain)) == [False, False, False, True] and len(plain) == 4


def test_uncovered_branch_and_path_are_reported(tmp_path: Path) -> None:
    """Without sgd's momentum-free cases the `else` of `if momentum != 0` is a missing branch, and
    so are both momentum-free paths (with and without weight decay)."""
    task = next(t for t in TASKS if t.task_id == "optimizer/sgd")
    only = replace(task, cases=tuple(c for c in task.cases if c["hparams"].get("momentum", 0.9) != 0))
    m = measure(only, tmp_path)
    (ref,) = _functions(ast.parse(Path(task.path).read_text()), "sgd")
    wd, mom = (s for s in ref.body if isinstance(s, ast.If))  # `if weight_decay != 0`, `if momentum != 0`
    assert m.missing_branches == [(mom.lineno, mom.end_lineno + 1)]  # to the statement after the if
    missing = [p for p in m.paths_needed if p not in m.paths_taken]
    assert sorted(sorted(p) for p in missing) == [[(wd.lineno, t), (mom.lineno, False)] for t in (False, True)]


TOY = '''"""A toy task for the pragma mechanism."""
import torch

CATEGORY = "Math"
LEVEL = 1


def toy(x: torch.Tensor, flip: bool = False) -> torch.Tensor:
    """Reference."""
    if x.numel() == 0:  # pragma: no branch{reason}
        return x.clone()
    if flip:
        return -x
    return x.clone()


CASES = [{{"name": "a_small", "small": True, "flip": False}}, {{"name": "b_small", "small": True, "flip": True}},
         {{"name": "big", "small": False, "flip": False}}]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    return (torch.ones(3),), {{"flip": case["flip"]}}


def cost(case: dict) -> dict:
    return {{"flops": 3, "bytes": 24}}
'''


@pytest.mark.parametrize("reason", [" - inputs are never empty (make_inputs draws 3 values)", ""])
def test_pragma_exempts_a_branch_only_with_a_reason(tmp_path: Path, reason: str) -> None:
    """A marked decision leaves both measures (its `True` arc is never taken, yet nothing is
    missing), and a marker without a reason is reported."""
    from kbx_ray.suites.builtin import task_from_file
    path = tmp_path / "math" / "toy" / "task.py"
    path.parent.mkdir(parents=True)
    path.write_text(TOY.format(reason=reason))
    m = measure(task_from_file(path, tmp_path), tmp_path)
    assert m.missing_branches == [] and len(m.paths_needed) == 2 and set(m.paths_needed) <= set(m.paths_taken)
    assert m.bad_pragmas == ([] if reason else [10])
    small_only = task_from_file(path, tmp_path)
    m = measure(replace(small_only, cases=small_only.cases[:1]), tmp_path)  # flip never set: reported
    assert m.missing_branches and [p for p in m.paths_needed if p not in m.paths_taken]
