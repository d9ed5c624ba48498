"""Python's scoping rules over an AST: which names a scope, or a whole module, binds.

The static checks ask it whether a name read is the builtin or the candidate's own (a parameter
named `input`), whether a name is bound anywhere at all, and what a kernel body may call.
Standard library only.
"""
from __future__ import annotations

import ast

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, *COMPS)


def parts(node: ast.AST) -> list[str]:
    """`a.b.c` -> ["a", "b", "c"]; [] when the chain is not rooted at a plain name."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    return [node.id, *reversed(out)] if isinstance(node, ast.Name) else []


def _binds(n: ast.AST) -> set[str]:
    """Names one node binds as a statement would: a store, a def or class, an `except ... as`
    name, an import."""
    if isinstance(n, ast.Name):
        return set() if isinstance(n.ctx, ast.Load) else {n.id}
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {n.name}
    if isinstance(n, ast.ExceptHandler):
        return {n.name} if n.name else set()
    if isinstance(n, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in n.names}
    return set()


def bindings(scope: ast.AST) -> set[str]:
    """Names a scope binds: parameters, stores, defs, imports and `except ... as` names."""
    names: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        names |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    body = scope.generators if isinstance(scope, COMPS) else scope.body
    stack = list(body) if isinstance(body, list) else [body]
    declared: set[str] = set()
    while stack:
        n = stack.pop()
        names |= _binds(n)
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared |= set(n.names)
        if isinstance(n, (*FUNCS, ast.ClassDef, ast.Lambda, *COMPS)):
            continue  # a scope of its own
        stack += list(ast.iter_child_nodes(n))
    return names - declared if not isinstance(scope, ast.Module) else names


def all_bindings(tree: ast.Module) -> set[str]:
    """Every name bound anywhere in the module: stores, parameters, defs, imports, handlers,
    `global` declarations and match captures."""
    names: set[str] = set()
    for n in ast.walk(tree):
        names |= _binds(n)
        if isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names |= set(n.names)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def targets(node: ast.AST) -> list[ast.AST]:
    """What a statement (or comprehension) assigns to."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension,
                         ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return []


def walk_local(node: ast.AST) -> list[ast.AST]:
    """The nodes of one block, not descending into nested functions or classes."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack += [c for c in ast.iter_child_nodes(n)
                  if not isinstance(c, (*FUNCS, ast.ClassDef, ast.Lambda))]
    return out
