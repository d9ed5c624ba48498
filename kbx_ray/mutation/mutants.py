"""Mutation testing: each task's own solution with one realistic bug (operators.py).

A harness whose cases pass a kernel with a missing mask or an off-by-one bound says little when it
calls a kernel correct. A good suite kills (fails) every mutant that changes behaviour; a survivor
points at a weak case or a loose tolerance. `mutants_for(source)` lists them;
`scripts/bench/mutation_score.py` scores the suite with them, and the `mutants` backend
(backend.py) serves them through the ordinary pipeline.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Iterator

from kbx_ray.mutation.operators import (
    OPERATORS, REDUCTIONS, REMOVE, Alt, call_of, changed_constant, is_attr,
)


@dataclass(frozen=True)
class Mutant:
    task_id: str
    index: int          # position in this task's list (the sample number that serves it)
    operator: str       # mask_removed, off_by_one, swapped_operator, ... (OPERATORS)
    line: int           # line of the mutated node in the solution
    description: str    # what changed, e.g. "offs < n -> offs <= n"
    code: str           # the mutated module source
    span: tuple[int, int] = (0, 0)  # lines of the statement it sits in (for coverage)


# ---- sites and application --------------------------------------------------------------------
def _context(tree: ast.Module) -> tuple[set[int], dict[int, ast.AST], set[int]]:
    """Node ids inside @triton.jit bodies, each node's parent, and ids never to mutate: decorators,
    signatures, module-level constants and launch options (BLOCK=, num_warps=)."""
    parent = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    kernel: set[int] = set()
    excluded: set[int] = set()
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            excluded |= {id(n) for n in ast.walk(stmt)}
            continue
        jit = any("jit" in ast.unparse(d) for d in stmt.decorator_list)
        _mark(stmt, jit)
        for part in [*stmt.decorator_list, stmt.args, *([stmt.returns] if stmt.returns else [])]:
            excluded |= {id(n) for n in ast.walk(part)}
        for body in stmt.body:
            ids = {id(n) for n in ast.walk(body)}
            kernel |= ids if jit else set()
            for n in ast.walk(body):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):  # k[grid](...)
                    excluded |= {id(x) for kw in n.keywords for x in ast.walk(kw)}
                if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant):  # docstrings
                    excluded.add(id(n.value))
    return kernel, parent, excluded


def _mark(func: ast.FunctionDef | ast.AsyncFunctionDef, jit: bool) -> None:
    """Annotate nodes with the facts some operators need: loads in reducing kernels, and
    `.contiguous()` called directly on one of the function's parameters."""
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    nodes = [n for b in func.body for n in ast.walk(b)]
    reducing = jit and any(isinstance(n, ast.Call) and is_attr(n.func, *REDUCTIONS) for n in nodes)
    for n in nodes:
        if reducing and call_of(n, "load"):
            n._kbx_reducing = True  # type: ignore[attr-defined]
        if call_of(n, "contiguous") and isinstance(n.func.value, ast.Name) \
                and n.func.value.id in params:
            n._kbx_on_input = True  # type: ignore[attr-defined]


def _statement_span(node: ast.AST, parent: dict[int, ast.AST]) -> tuple[int, int]:
    while not isinstance(node, ast.stmt) and id(node) in parent:
        node = parent[id(node)]
    if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)):
        return node.lineno, node.lineno  # a compound statement: its header line
    return getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0)


def _alternatives(op: str, node: ast.AST, kernel: set[int],
                  parent: dict[int, ast.AST]) -> list[Alt]:
    k = id(node) in kernel
    if op == "changed_constant":
        return changed_constant(node, k, parent.get(id(node)))
    return OPERATORS[op](node, k)


Site = tuple[str, int, int, str, int, tuple[int, int]]  # op, node index, alt, description, line, span


def _sites(tree: ast.Module) -> Iterator[Site]:
    kernel, parent, excluded = _context(tree)
    for i, node in enumerate(ast.walk(tree)):
        if id(node) in excluded:
            continue
        for op in OPERATORS:
            for j, (desc, _) in enumerate(_alternatives(op, node, kernel, parent)):
                yield op, i, j, desc, getattr(node, "lineno", 0), _statement_span(node, parent)


def _apply(source: str, index: int, op: str, alt: int) -> str:
    tree = ast.parse(source)
    kernel, parent, _ = _context(tree)
    node = list(ast.walk(tree))[index]
    new = _alternatives(op, node, kernel, parent)[alt][1]
    holder = parent[id(node)]
    for name, value in ast.iter_fields(holder):
        if value is node:
            setattr(holder, name, new)
        elif isinstance(value, list) and any(v is node for v in value):
            pos = next(p for p, v in enumerate(value) if v is node)
            if new is REMOVE:
                del value[pos]
                if not value:
                    value.append(ast.Pass())
            else:
                value[pos] = new
    return ast.unparse(ast.fix_missing_locations(tree))


def _spread(items: list[Any], n: int) -> list[Any]:
    """Up to n items spread evenly over the list (deterministic)."""
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)] if n > 1 else items[:1]


def mutants_for(source: str, task_id: str = "", per_operator: int = 3) -> list[Mutant]:
    """Distinct mutants of `source`, at most `per_operator` sites per operator."""
    base = ast.unparse(ast.parse(source))
    by_op: dict[str, list[Site]] = {}
    for site in _sites(ast.parse(source)):
        by_op.setdefault(site[0], []).append(site)
    out: list[Mutant] = []
    seen = {base}
    for op in OPERATORS:
        for _, i, j, desc, line, span in _spread(by_op.get(op, []), per_operator):
            code = _apply(source, i, op, j)
            if code not in seen:
                seen.add(code)
                out.append(Mutant(task_id, len(out), op, line, desc, code, span))
    return out
