"""A candidate's source -> its kernel module: the `@triton.jit` functions and what they may name.
More: kbx_ray/evaluate/static/README.md, `kernels.py`.
"""
from __future__ import annotations

import ast
import inspect


Span = tuple[int, int, int, "str | None"]
_PURE = frozenset({"int", "float", "abs", "min", "max", "round"})  # builtins on constants


def _is_jit(dec: ast.expr) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(node, ast.Attribute) and node.attr == "jit") or \
        (isinstance(node, ast.Name) and node.id == "jit")


def _constant(node: ast.AST, bound: set[str]) -> bool:
    """A value computed from literals and names already kept (no call but `constexpr(...)`)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in bound
    if isinstance(node, ast.Attribute):
        return _constant(node.value, bound)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_constant(e, bound) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand, bound)
    if isinstance(node, ast.BinOp):
        return _constant(node.left, bound) and _constant(node.right, bound)
    if isinstance(node, ast.Call):
        f = node.func
        root = f
        while isinstance(root, ast.Attribute):
            root = root.value
        pure = (isinstance(f, ast.Attribute) and f.attr == "constexpr" and _constant(f, bound)) \
            or (isinstance(root, ast.Name) and root.id == "math" and "math" in bound) \
            or (isinstance(f, ast.Name) and f.id in _PURE)
        return pure and not node.keywords and all(_constant(a, bound) for a in node.args)
    return False


def kernel_source(code: str) -> str:
    """The kernel module's source for `code` (already parsed and checked by the caller)."""
    tree = ast.parse(code)
    kept: list[ast.stmt] = []
    bound = {"True", "False", "None"}
    spans: dict[int, Span] = {}  # id(node) -> (first line, last line, its `def` line, @jit)
    for node in tree.body:
        decs = getattr(node, "decorator_list", None)
        spans[id(node)] = (decs[0].lineno if decs else node.lineno,
                           node.end_lineno or node.lineno, node.lineno, None)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept.append(node)
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            jit = next(d for d in node.decorator_list if _is_jit(d))
            spans[id(node)] = spans[id(node)][:3] + (ast.get_source_segment(code, jit),)
            node.decorator_list = [jit]
            kept.append(node)
            bound.add(node.name)
        elif isinstance(node, ast.Assign) and _constant(node.value, bound) and all(
                isinstance(t, ast.Name) for t in node.targets):
            kept.append(node)
            bound |= {t.id for t in node.targets}  # type: ignore[attr-defined]
        elif isinstance(node, ast.AnnAssign) and node.value is not None and \
                isinstance(node.target, ast.Name) and _constant(node.value, bound):
            kept.append(node)
            bound.add(node.target.id)
    return (_in_place(code, [spans[id(n)] for n in kept],
                      [spans[id(n)] for n in tree.body if n not in kept])
            or ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n")


def _in_place(code: str, kept: list[Span], dropped: list[Span]) -> str:
    """The kept statements' own text on their own lines, every other line blank, a jit
    function's decorators replaced by its `@triton.jit` from its first decorator's line: its
    source and first line are the candidate's, so Triton's cache keys are the worker's and a
    kernel the replay compiled is one the worker finds (static/README.md). "" where a kept
    statement shares a line with a dropped one."""
    lines = code.splitlines()
    out = [""] * len(lines)
    taken = {n for first, last, _, _ in kept for n in range(first, last + 1)}
    dropped_rows = {n for first, last, _, _ in dropped for n in range(first, last + 1)}
    if taken & dropped_rows:
        return ""
    for first, last, body, jit in kept:
        if jit is not None:  # its block as `inspect` reads it: trailing comments included
            block = inspect.getblock([ln + "\n" for ln in lines[first - 1:]])
            last = max(last, first - 1 + len(block))
            if any(n in dropped_rows for n in range(first, last + 1)):
                return ""
        out[first - 1:last] = lines[first - 1:last]
        if jit is not None:
            head = ("@" + jit).splitlines()
            if len(head) > body - first:
                return ""
            out[first - 1:body - 1] = head + [""] * (body - first - len(head))
    return "\n".join(out) + "\n"
