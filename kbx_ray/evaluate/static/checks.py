"""Static checks on candidate source (AST), run in the trusted parent before the code executes.

Violations disqualify the candidate; flags are observations kept on the record. The rules (tables
in `policy.py`, module resolution in `resolve.py`) close the routes by which a
candidate could reach the OS, the interpreter's namespaces, other streams or the harness: imports
are allowlisted; chains rooted at an imported module are resolved against the real torch and
triton, so `torch.os` or `typing.sys` is seen as the module it is; attribute names on runtime
values are denylisted (frames, file readers, side streams); dunders, private attributes,
monkeypatching, exception fallbacks, format-string traversal and hooks such as `__torch_function__`
are refused. INTEGRITY.md explains what each rule stops.

The checks come in families, one module each: what the names stand for (`aliases.py`, the
base holding the imports and module aliases), what the code reaches by name, attribute and store
(`reach.py`), and the module's forms: fallbacks, hooks, the entry and the kernels
(`forms.py`); `scopes.py` has Python's scoping rules over the AST.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kbx_ray.evaluate.static.forms import FormChecks
from kbx_ray.evaluate.static.reach import ReachChecks
from kbx_ray.evaluate.static.scopes import all_bindings, targets


@dataclass
class StaticReport:
    violations: list[str] = field(default_factory=list)  # disqualifying
    flags: list[str] = field(default_factory=list)       # recorded observations
    kernels: list[str] = field(default_factory=list)     # @triton.jit function names


def static_check(tree: ast.Module, entry: str) -> StaticReport:
    return _Checker(tree, entry).run()


class _Checker(ReachChecks, FormChecks):
    def __init__(self, tree: ast.Module, entry: str) -> None:
        super().__init__(tree, entry)
        self.rep = StaticReport()

    def run(self) -> StaticReport:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
        self._collect_aliases()
        self.bound = all_bindings(self.tree)
        self._collect_ctx_names()
        for node in ast.walk(self.tree):
            self._visit(node)
        self._check_structure()
        self.rep.violations = sorted(set(self.rep.violations))
        self.rep.flags = sorted(set(self.rep.flags))
        return self.rep

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self._name(node)
        elif isinstance(node, ast.Attribute):
            self._attribute(node)
        elif isinstance(node, ast.arg) and node.arg in self.aliases:
            self.bad(f"rebinds the module name {node.arg!r}")
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._try(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._definition(node)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.rep.flags.append("global_state")
        for t in targets(node):
            self._target(t, node)
