"""What each name in candidate source stands for: the module aliases its imports and assignments
make, resolved against the real torch and triton (`policy.resolve_chain`).

`AliasScope` is the base of the static checker (`checks.py`): it holds the state every family of
checks reads (the parent of each node, the alias table, the names bound anywhere) and judges the
imports as it collects them. Standard library, torch and triton only.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any

from kbx_ray.evaluate.static import policy as P
from kbx_ray.evaluate.static.resolve import closed_module, resolve_chain, walk
from kbx_ray.evaluate.static.scopes import parts


class AliasScope:
    rep: Any  # the StaticReport being filled (`checks.StaticReport`)

    def __init__(self, tree: ast.Module, entry: str) -> None:
        self.tree, self.entry = tree, entry
        self.aliases: dict[str, tuple[str, ...]] = {}   # name -> module-rooted chain
        self.alias_nodes: set[int] = set()              # the import / alias statements
        self.parent: dict[int, ast.AST] = {}
        self.bound: set[str] = set()                    # every name the module binds, anywhere
        self.ctx_names: set[int] = set()                # Name nodes that are an autograd ctx

    def bad(self, msg: str) -> None:
        self.rep.violations.append(msg)

    def _collect_aliases(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self.alias_nodes.add(id(node))
                for a in node.names:
                    self._check_import(a.name)
                    if a.asname:
                        self.aliases[a.asname] = tuple(a.name.split("."))
                    else:
                        self.aliases[a.name.split(".")[0]] = (a.name.split(".")[0],)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
        for _ in range(3):  # `F = torch.nn.functional`, `G = F` ...: module aliases by assignment
            for node in ast.walk(self.tree):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and self._module_chain(node.value)):
                    self.aliases[node.targets[0].id] = self._expand(node.value)
                    self.alias_nodes.add(id(node))

    def _import_from(self, node: ast.ImportFrom) -> None:
        self.alias_nodes.add(id(node))
        mod = node.module or ""
        if node.level:
            self.bad(f"relative import {'.' * node.level}{mod}")
            return
        self._check_import(mod)
        for a in node.names:
            if a.name == "*":
                self.bad(f"star import from {mod}")
                continue
            chain = (*mod.split("."), a.name)
            why = resolve_chain(chain) or P.banned_attr_name(a.name)
            if why:
                self.bad(f"imports {'.'.join(chain)}: {why}")
            self.aliases[a.asname or a.name] = chain

    def _check_import(self, name: str) -> None:
        root = name.split(".")[0]
        if root in P.ROOTS:
            why = resolve_chain(tuple(name.split(".")))
            if why:
                self.bad(f"imports {name}: {why}")
        elif root not in P.STDLIB_ALLOW or name != root:
            self.bad(f"imports {name!r} (allowed: torch, triton and "
                     f"{', '.join(sorted(P.STDLIB_ALLOW))})")

    def _expand(self, node: ast.AST) -> tuple[str, ...]:
        chain = parts(node)
        if not chain or chain[0] not in self.aliases:
            return ()
        return (*self.aliases[chain[0]], *chain[1:])

    def _module_chain(self, node: ast.AST) -> bool:
        chain = self._expand(node)
        return bool(chain) and chain[0] in P.ROOTS and inspect.ismodule(walk(list(chain)))

    def _module_value_ok(self, node: ast.AST) -> bool:
        """A module as a value that cannot reach more than its chains: `hasattr(tl.math, "x")`
        (the probed chain is judged), or a closed triton.language module (`closed_module`)."""
        chain = self._expand(node)
        call = self.parent.get(id(node))
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id ==
                "hasattr" and len(call.args) == 2 and call.args[0] is node
                and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)):
            name = call.args[1].value
            why = resolve_chain((*chain, name)) or P.banned_attr_name(name) or (
                "a private name" if name.startswith("_") else None)
            if why:
                self.bad(f"probes {'.'.join(chain)}.{name}: {why}")
            return True
        return closed_module(chain)

    def _collect_ctx_names(self) -> None:
        """The first parameter of forward/backward/setup_context in a torch.autograd.Function
        subclass is the ctx object; stores on it are not monkeypatching, provided the class's
        methods are reached only through `.apply` (so ctx can never be a library object)."""
        import torch

        for cls in ast.walk(self.tree):
            if not isinstance(cls, ast.ClassDef) or not any(
                    walk(list(self._expand(b))) is torch.autograd.Function for b in cls.bases
                    if self._expand(b) and self._expand(b)[0] in P.ROOTS):
                continue
            direct = any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                         and n.value.id == cls.name and n.attr != "apply"
                         for n in ast.walk(self.tree))
            if direct:
                continue
            for f in cls.body:
                if (isinstance(f, ast.FunctionDef) and f.args.args
                        and f.name in ("forward", "backward", "setup_context")):
                    ctx = f.args.args[0].arg
                    self.ctx_names |= {id(n) for n in ast.walk(f)
                                       if isinstance(n, ast.Name) and n.id == ctx}
