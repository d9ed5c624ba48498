"""Static checks on candidate source (AST), run in the trusted parent before the code executes.
More: kbx_ray/evaluate/static/README.md, `checks.py`.
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
