"""Mutation operators: (AST node, inside a @triton.jit body?) -> the realistic bugs it can carry.

Each operator is a bug of the kind models make: a removed mask, a swapped operator, a lowered dtype,
a dropped store, swapped strides, a grid that no longer covers the input... It returns
(description, replacement node) pairs, or REMOVE to delete the statement
(kbx_ray/mutation/mutants.py applies them).
"""
from __future__ import annotations

import ast
import copy
from typing import Any, Callable

REMOVE = object()  # a statement to delete
Alt = tuple[str, Any]  # (description, replacement node or REMOVE)


def is_attr(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in names


def call_of(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and is_attr(node.func, *names)


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
    if k and call_of(node, "load", "store") and any(kw.arg == "mask" for kw in node.keywords):
        kws = [kw for kw in node.keywords if kw.arg not in ("mask", "other")]
        return [(f"{_src(node)}: mask removed", _with(node, keywords=kws))]
    return []


REDUCTIONS = ("sum", "max", "min", "argmax", "argmin", "dot", "cumsum", "cumprod", "reduce",
               "associative_scan", "xor_sum")


def other_changed(node: ast.AST, k: bool) -> list[Alt]:
    """Only in kernels that reduce: elsewhere masked-off lanes are never stored, and the mutant
    would be equivalent by construction."""
    if not (k and call_of(node, "load")) or not getattr(node, "_kbx_reducing", False):
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
    if k and call_of(node, "arange"):
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
    if k and isinstance(node, ast.Call) and is_attr(node.func, *_FUNC):
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
    if is_attr(node, "float32") and isinstance(node.value, ast.Name):
        new = _with(node, attr="float16")
        return [(f"{_src(node)} -> {_src(new)}", new)]
    return []


def dropped_store(node: ast.AST, k: bool) -> list[Alt]:
    if k and isinstance(node, ast.Expr) and call_of(node.value, "store", "atomic_add"):
        return [(f"{_src(node.value)} dropped", REMOVE)]
    return []


def swapped_strides(node: ast.AST, k: bool) -> list[Alt]:
    out: list[Alt] = []
    if not isinstance(node, ast.Call) or k:
        return out
    for i in range(len(node.args) - 1):
        a, b = node.args[i], node.args[i + 1]
        if call_of(a, "stride") and call_of(b, "stride"):
            args = [*node.args[:i], b, a, *node.args[i + 2:]]
            out.append((f"{_src(a)}, {_src(b)} swapped", _with(node, args=args)))
    if call_of(node, "stride") and node.args and isinstance(node.args[0], ast.Constant):
        dim = node.args[0].value
        new = _with(node, args=[ast.Constant(1 if dim == 0 else 0)])
        out.append((f"{_src(node)} -> {_src(new)}", new))
    return out


def block_not_covering(node: ast.AST, k: bool) -> list[Alt]:
    if call_of(node, "cdiv") and len(node.args) == 2:
        new = ast.BinOp(copy.deepcopy(node.args[0]), ast.FloorDiv(), copy.deepcopy(node.args[1]))
        return [(f"{_src(node)} -> {_src(new)} (drops the tail)", new)]
    if call_of(node, "next_power_of_2"):
        halved = ast.BinOp(copy.deepcopy(node), ast.FloorDiv(), ast.Constant(2))
        return [(f"{_src(node)} halved", halved)]
    return []


def dropped_contiguous(node: ast.AST, k: bool) -> list[Alt]:
    """Only on the entry's own inputs: a survivor then means no case passes a non-contiguous one
    (or the kernel reads strides anyway, which makes the call an optimisation)."""
    if not k and call_of(node, "contiguous") and not node.args \
            and getattr(node, "_kbx_on_input", False):
        return [(f"{_src(node)} -> {_src(node.func.value)}", copy.deepcopy(node.func.value))]
    return []


def wrong_program_id(node: ast.AST, k: bool) -> list[Alt]:
    if k and call_of(node, "program_id") and node.args and isinstance(node.args[0], ast.Constant):
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
