"""The `mutants` backend: each task's own solution with one realistic bug, for mutation testing.

A harness whose cases pass a kernel with a missing mask or an off-by-one bound says little when it
calls a kernel correct. A mutant is the solution with one small AST change of the kind models make
(a removed mask, a swapped operator, a lowered dtype, a dropped store, swapped strides, a grid that
no longer covers the input, ...). A good suite kills (fails) every mutant that changes behaviour;
a survivor points at a weak case or a loose tolerance. `mutants_for(source)` lists them;
`scripts/bench/mutation_score.py` scores the suite with them; as a backend, sample k of a task is
answered with its k-th mutant, so a sweep with `backend: mutants` runs them through the ordinary
pipeline (past the last mutant the answer holds no code: no_code_block).
"""
from __future__ import annotations

import ast
import copy
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.types import Generation

REMOVE = object()  # a statement to delete
Alt = tuple[str, Any]  # (description, replacement node or REMOVE)


@dataclass(frozen=True)
class Mutant:
    task_id: str
    index: int          # position in this task's list (the sample number that serves it)
    operator: str       # mask_removed, off_by_one, swapped_operator, ... (OPERATORS)
    line: int           # line of the mutated node in the solution
    description: str    # what changed, e.g. "offs < n -> offs <= n"
    code: str           # the mutated module source
    span: tuple[int, int] = (0, 0)  # lines of the statement it sits in (for coverage)


def _is_attr(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in names


def _call_of(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and _is_attr(node.func, *names)


def _src(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _with(node: ast.AST, **changes: Any) -> ast.AST:
    new = copy.deepcopy(node)
    for k, v in changes.items():
        setattr(new, k, v)
    return new


# ---- operators: (node, in_kernel) -> alternatives -------------------------------------------
def mask_removed(node: ast.AST, k: bool) -> list[Alt]:
    if k and _call_of(node, "load", "store") and any(kw.arg == "mask" for kw in node.keywords):
        kws = [kw for kw in node.keywords if kw.arg not in ("mask", "other")]
        return [(f"{_src(node)}: mask removed", _with(node, keywords=kws))]
    return []


_REDUCTIONS = ("sum", "max", "min", "argmax", "argmin", "dot", "cumsum", "cumprod", "reduce",
               "associative_scan", "xor_sum")


def other_changed(node: ast.AST, k: bool) -> list[Alt]:
    """Only in kernels that reduce: elsewhere masked-off lanes are never stored, and the mutant
    would be equivalent by construction."""
    if not (k and _call_of(node, "load")) or not getattr(node, "_kbx_reducing", False):
        return []
    for i, kw in enumerate(node.keywords):
        if kw.arg == "other":
            val = kw.value.value if isinstance(kw.value, ast.Constant) else None
            new = 1.0 if val in (0, 0.0) else 0.0
            kws = [*node.keywords[:i], ast.keyword("other", ast.Constant(new)),
                   *node.keywords[i + 1:]]
            return [(f"other={_src(kw.value)} -> other={new}", _with(node, keywords=kws))]
    return []


_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def off_by_one(node: ast.AST, k: bool) -> list[Alt]:
    if k and isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIP:
        new = _with(node, ops=[_FLIP[type(node.ops[0])](), *node.ops[1:]])
        return [(f"{_src(node)} -> {_src(new)}", new)]
    if k and _call_of(node, "arange"):
        shifted = ast.BinOp(copy.deepcopy(node), ast.Add(), ast.Constant(1))
        return [(f"{_src(node)} -> {_src(node)} + 1", shifted)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and len(node.args) == 3:
        stop = ast.BinOp(copy.deepcopy(node.args[1]), ast.Sub(), copy.deepcopy(node.args[2]))
        new = _with(node, args=[node.args[0], stop, node.args[2]])
        return [(f"{_src(node)} -> {_src(new)} (skips the last block)", new)]
    return []


_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
          ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
_FUNC = {"maximum": "minimum", "minimum": "maximum", "max": "min", "min": "max", "sum": "max",
         "exp": "exp2", "exp2": "exp", "log": "log2", "log2": "log"}


def swapped_operator(node: ast.AST, k: bool) -> list[Alt]:
    if k and isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        new = _with(node, op=_BINOP[type(node.op)]())
        return [(f"{_src(node)} -> {_src(new)}", new)]
    if k and isinstance(node, ast.Call) and _is_attr(node.func, *_FUNC):
        new = _with(node, func=_with(node.func, attr=_FUNC[node.func.attr]))
        return [(f"{_src(node)} -> {_src(new)}", new)]
    return []


def changed_constant(node: ast.AST, k: bool, parent: ast.AST | None = None) -> list[Alt]:
    if not (k and isinstance(node, ast.Constant)) or isinstance(node.value, bool):
        return []
    if isinstance(node.value, float):
        if 0 < abs(node.value) < 1e-3:
            return []  # an epsilon: a 50% change sits below any tolerance, by design
        new = node.value * 1.5 if node.value else 1.0
    elif isinstance(node.value, int) and isinstance(parent, (ast.BinOp, ast.Compare)):
        if node.value >= 256 or (node.value >= 16 and node.value & (node.value - 1) == 0):
            return []  # a tile size or a bit mask: compile errors or last-bit changes say nothing
        new = node.value + 1
    else:
        return []
    return [(f"constant {node.value!r} -> {new!r}", ast.Constant(new))]


def lowered_dtype(node: ast.AST, k: bool) -> list[Alt]:
    if _is_attr(node, "float32") and isinstance(node.value, ast.Name):
        new = _with(node, attr="float16")
        return [(f"{_src(node)} -> {_src(new)}", new)]
    return []


def dropped_store(node: ast.AST, k: bool) -> list[Alt]:
    if k and isinstance(node, ast.Expr) and _call_of(node.value, "store", "atomic_add"):
        return [(f"{_src(node.value)} dropped", REMOVE)]
    return []


def swapped_strides(node: ast.AST, k: bool) -> list[Alt]:
    out: list[Alt] = []
    if not isinstance(node, ast.Call) or k:
        return out
    for i in range(len(node.args) - 1):
        a, b = node.args[i], node.args[i + 1]
        if _call_of(a, "stride") and _call_of(b, "stride"):
            args = [*node.args[:i], b, a, *node.args[i + 2:]]
            out.append((f"{_src(a)}, {_src(b)} swapped", _with(node, args=args)))
    if _call_of(node, "stride") and node.args and isinstance(node.args[0], ast.Constant):
        dim = node.args[0].value
        new = _with(node, args=[ast.Constant(1 if dim == 0 else 0)])
        out.append((f"{_src(node)} -> {_src(new)}", new))
    return out


def block_not_covering(node: ast.AST, k: bool) -> list[Alt]:
    if _call_of(node, "cdiv") and len(node.args) == 2:
        new = ast.BinOp(copy.deepcopy(node.args[0]), ast.FloorDiv(), copy.deepcopy(node.args[1]))
        return [(f"{_src(node)} -> {_src(new)} (drops the tail)", new)]
    if _call_of(node, "next_power_of_2"):
        halved = ast.BinOp(copy.deepcopy(node), ast.FloorDiv(), ast.Constant(2))
        return [(f"{_src(node)} halved", halved)]
    return []


def dropped_contiguous(node: ast.AST, k: bool) -> list[Alt]:
    """Only on the entry's own inputs: a survivor then means no case passes a non-contiguous one
    (or the kernel reads strides anyway, which makes the call an optimisation)."""
    if not k and _call_of(node, "contiguous") and not node.args \
            and getattr(node, "_kbx_on_input", False):
        return [(f"{_src(node)} -> {_src(node.func.value)}", copy.deepcopy(node.func.value))]
    return []


def wrong_program_id(node: ast.AST, k: bool) -> list[Alt]:
    if k and _call_of(node, "program_id") and node.args and isinstance(node.args[0], ast.Constant):
        new = _with(node, args=[ast.Constant(1 if node.args[0].value == 0 else 0)])
        return [(f"{_src(node)} -> {_src(new)}", new)]
    return []


def dropped_accumulate(node: ast.AST, k: bool) -> list[Alt]:
    if k and isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Mult)):
        new = ast.Assign(targets=[copy.deepcopy(node.target)], value=copy.deepcopy(node.value),
                         lineno=node.lineno)
        return [(f"{_src(node)} -> {_src(new)}", new)]
    return []


OPERATORS: dict[str, Callable[..., list[Alt]]] = {
    f.__name__: f for f in (mask_removed, other_changed, off_by_one, swapped_operator,
                            changed_constant, lowered_dtype, dropped_store, swapped_strides,
                            block_not_covering, dropped_contiguous, wrong_program_id,
                            dropped_accumulate)
}


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
    reducing = jit and any(isinstance(n, ast.Call) and _is_attr(n.func, *_REDUCTIONS) for n in nodes)
    for n in nodes:
        if reducing and _call_of(n, "load"):
            n._kbx_reducing = True  # type: ignore[attr-defined]
        if _call_of(n, "contiguous") and isinstance(n.func.value, ast.Name) \
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


class MutantsBackend:
    """Answers (task, sample k) with the k-th mutant of the task's solution."""

    name = "mutants"

    def __init__(self, solutions: dict[str, str], per_operator: int = 3) -> None:
        self.solutions = solutions  # task_id -> solution.py path
        self.per_operator = per_operator
        self.cache: dict[str, list[Mutant]] = {}

    def mutants(self, task_id: str) -> list[Mutant]:
        if task_id not in self.cache:
            path = self.solutions.get(task_id)
            source = open(path).read() if path else ""
            self.cache[task_id] = mutants_for(source, task_id, self.per_operator) if source else []
        return self.cache[task_id]

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        t0 = time.perf_counter()
        task_id, k = params.meta.get("task_id", ""), int(params.meta.get("sample", 0))
        found = self.mutants(task_id)
        if k < len(found):
            m = found[k]
            text = (f"Mutant {k} ({m.operator}, line {m.line}: {m.description}).\n\n"
                    f"```python\n{m.code}\n```\n")
        else:
            text = f"{task_id} has {len(found)} mutants; sample {k} has none."
        return Generation(text=text, latency_s=time.perf_counter() - t0, model=self.name)


def build(cfg: Any) -> MutantsBackend:
    from kbx_ray.suite import load_suite

    options = dict(getattr(cfg, "options", None) or {})
    suite = load_suite(getattr(cfg, "suite_path", None) or None)
    return MutantsBackend({t.task_id: t.solution_path for t in suite if t.solution_path},
                          int(options.get("per_operator", 3)))
