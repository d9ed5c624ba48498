"""Static checks on candidate source (AST), run in the trusted parent before the code executes.

Violations disqualify the candidate; flags are observations kept on the record. The rules (tables
and module resolution in `static_policy.py`) close the routes by which a candidate could reach the OS, the
interpreter's namespaces, other streams or the harness: imports are allowlisted; chains rooted at an
imported module are resolved against the real torch and triton, so `torch.os` or `typing.sys` is
seen as the module it is; attribute names on runtime values are denylisted (frames, file readers,
side streams); dunders, private attributes, monkeypatching, exception fallbacks, format-string
traversal and hooks such as `__torch_function__` are refused. INTEGRITY.md explains what each rule
stops.
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field

from kbx_ray.evaluate import static_policy as P
from kbx_ray.evaluate.static_policy import MISSING, resolve_chain, walk

ALLOWED_IMPORTS = frozenset(P.STDLIB_ALLOW) | P.ROOTS
TORCH_ALLOC = P.TORCH_ALLOC
_FORMAT_FIELD = re.compile(r"\{[^{}!:]*[.\[]")
_ENTRY_DECORATORS = {"torch.no_grad", "torch.inference_mode"}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class StaticReport:
    violations: list[str] = field(default_factory=list)  # disqualifying
    flags: list[str] = field(default_factory=list)       # recorded observations
    kernels: list[str] = field(default_factory=list)     # @triton.jit function names


def static_check(tree: ast.Module, entry: str) -> StaticReport:
    return _Checker(tree, entry).run()


def _parts(node: ast.AST) -> list[str]:
    """`a.b.c` -> ["a", "b", "c"]; [] when the chain is not rooted at a plain name."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    return [node.id, *reversed(out)] if isinstance(node, ast.Name) else []


class _Checker:
    def __init__(self, tree: ast.Module, entry: str) -> None:
        self.tree, self.entry = tree, entry
        self.rep = StaticReport()
        self.aliases: dict[str, tuple[str, ...]] = {}   # name -> module-rooted chain
        self.alias_nodes: set[int] = set()              # the import / alias statements
        self.parent: dict[int, ast.AST] = {}
        self.bound: set[str] = set()                    # every name the module binds, anywhere
        self.ctx_names: set[int] = set()                # Name nodes that are an autograd ctx

    def bad(self, msg: str) -> None:
        self.rep.violations.append(msg)

    def run(self) -> StaticReport:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
        self._collect_aliases()
        self.bound = _all_bindings(self.tree)
        self._collect_ctx_names()
        for node in ast.walk(self.tree):
            self._visit(node)
        self._check_structure()
        self.rep.violations = sorted(set(self.rep.violations))
        self.rep.flags = sorted(set(self.rep.flags))
        return self.rep

    # ---- aliases -----------------------------------------------------------------------------
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
                self.alias_nodes.add(id(node))
                mod = node.module or ""
                if node.level:
                    self.bad(f"relative import {'.' * node.level}{mod}")
                    continue
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
        for _ in range(3):  # `F = torch.nn.functional`, `G = F` ...: module aliases by assignment
            for node in ast.walk(self.tree):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and self._module_chain(node.value)):
                    self.aliases[node.targets[0].id] = self._expand(node.value)
                    self.alias_nodes.add(id(node))

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
        parts = _parts(node)
        if not parts or parts[0] not in self.aliases:
            return ()
        return (*self.aliases[parts[0]], *parts[1:])

    def _module_chain(self, node: ast.AST) -> bool:
        chain = self._expand(node)
        return bool(chain) and chain[0] in P.ROOTS and inspect.ismodule(walk(list(chain)))

    # ---- the walk ----------------------------------------------------------------------------
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
        for t in _targets(node):
            self._target(t, node)

    def _name(self, node: ast.Name) -> None:
        name = node.id
        if name in P.BANNED_NAMES and isinstance(node.ctx, ast.Load) and not self._shadowed(node):
            if not (name == "type" and self._type_for_display(node)):
                self.bad(f"uses the builtin {name!r}")
        elif (isinstance(node.ctx, ast.Load) and name not in self.bound
              and name not in _BUILTINS and not name.startswith("__")):
            # never bound here and no builtin: on a GPU a NameError; under the interpreter a name
            # it copies into the module (`np`, `inspect`, `triton`, ...) after the first launch
            self.bad(f"uses the name {name!r}, which the module never defines")
        elif name.startswith("__") and name.endswith("__") and name not in ("__name__", "__doc__"):
            self.bad(f"uses the dunder name {name!r}")
        if name not in self.aliases or not isinstance(node.ctx, ast.Load):
            return
        parent = self.parent.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if (id(parent) not in self.alias_nodes and self._module_chain(node)
                and not self._module_value_ok(node)):
            self.bad(f"passes the module {name!r} around as a value")

    def _attribute(self, node: ast.Attribute) -> None:
        attr, root = node.attr, _parts(node)[:1]
        own = root in (["self"], ["cls"]) and root[0] not in self.aliases
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in P.SAFE_DUNDER_ATTRS:
                self.bad(f"reaches the dunder attribute {attr!r}")
        elif attr.startswith("_") and not own:
            self.bad(f"reaches the private attribute {attr!r}")
        why = P.banned_attr_name(attr)
        if why:
            self.bad(why)
        parent = self.parent.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # only whole chains are resolved (each prefix is judged on the way)
        chain = self._expand(node)
        if chain:
            why = resolve_chain(chain)
            if why:
                self.bad(why)
            elif id(parent) not in self.alias_nodes and self._module_chain(node) and not (
                    isinstance(parent, ast.Call) and parent.func is node) and not (
                    self._module_value_ok(node)):
                self.bad(f"passes the module {'.'.join(chain)} around as a value")

    def _target(self, t: ast.AST, stmt: ast.AST) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._target(e, stmt)
        elif isinstance(t, ast.Starred):
            self._target(t.value, stmt)
        elif isinstance(t, ast.Name):
            if t.id in self.aliases and id(stmt) not in self.alias_nodes:
                self.bad(f"rebinds the module name {t.id!r}")
        elif isinstance(t, ast.Attribute):
            root = _parts(t)[:1]
            if isinstance(t.value, ast.Name) and id(t.value) in self.ctx_names:
                return  # `ctx.beta = beta` in an autograd Function: the ctx object is its own
            if root not in (["self"], ["cls"]) or root[0] in self.aliases:
                what = ".".join(self._expand(t) or _parts(t)) or f"attribute {t.attr!r}"
                self.bad(f"monkeypatches {what} (assigns to an object it does not own)")
        elif isinstance(t, ast.Subscript) and self._expand(t.value):
            what = ".".join(self._expand(t.value))
            self.bad(f"monkeypatches {what} (assigns into library state)")

    def _try(self, node: ast.AST) -> None:
        for h in getattr(node, "handlers", []):
            if not all(isinstance(s, ast.Raise) for s in h.body):
                self.bad("try/except that does not re-raise (a fallback)")
        for stmt in getattr(node, "finalbody", []):
            for sub in _walk_local(stmt):
                if isinstance(sub, (ast.Return, ast.Break, ast.Continue)):
                    self.bad("return/break/continue in a finally block (swallows the exception)")

    def _definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        name = node.name
        if name.startswith("__") and name.endswith("__") and name not in P.SAFE_DUNDER_DEFS:
            self.bad(f"defines the hook {name!r}")
        if name in self.aliases:
            self.bad(f"rebinds the module name {name!r}")
        if not isinstance(node, ast.ClassDef):
            return
        if node.keywords:
            self.bad(f"class {name} passes class keywords (a metaclass)")
        for base in node.bases:
            chain = self._expand(base)
            obj = walk(list(chain)) if chain and chain[0] in P.ROOTS else MISSING
            import torch

            if isinstance(obj, type) and issubclass(obj, torch.Tensor):
                self.bad(f"class {name} subclasses torch.Tensor (outputs must be plain tensors)")

    def _call(self, node: ast.Call) -> None:
        chain = self._expand(node.func)
        if chain and chain[0] == "torch" and chain[-1] not in TORCH_ALLOC:
            self.rep.flags.append(f"torch_call:{'.'.join(chain)}")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            recv = node.func.value
            if not (isinstance(recv, ast.Constant) and isinstance(recv.value, str)):
                self.bad("calls .format on a computed string")
            elif _FORMAT_FIELD.search(recv.value):
                self.bad("a format string that reads attributes or items of its arguments")

    def _type_for_display(self, node: ast.Name) -> bool:
        """`type(x)` with one argument whose result is only shown or compared (an error message,
        `type(x).__name__`, `type(x) is torch.Tensor`): it names a class, it calls nothing."""
        call = self.parent.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1
                and not call.keywords):
            return False
        use = self.parent.get(id(call))
        if isinstance(use, ast.Attribute):
            return use.attr in ("__name__", "__qualname__")
        if isinstance(use, (ast.FormattedValue, ast.Compare)):
            return True
        while use is not None and not isinstance(use, ast.stmt):
            if isinstance(use, ast.JoinedStr):
                return True
            use = self.parent.get(id(use))
        return isinstance(use, ast.Raise)

    def _module_value_ok(self, node: ast.AST) -> bool:
        """A module as a value that cannot reach more than its chains: `hasattr(tl.math, "x")`
        (the probed chain is judged), or a closed triton.language module (`policy.closed_module`)."""
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
        return P.closed_module(chain)

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

    def _shadowed(self, node: ast.Name) -> bool:
        """True when the name is bound by the candidate in a scope it is read from (a parameter
        named `input`), so it does not refer to the builtin. Defaults and decorators belong to the
        enclosing scope, and a comprehension's first iterable too."""
        path: list[ast.AST] = [node]
        while id(path[-1]) in self.parent:
            scope = self.parent[id(path[-1])]
            prev = path[-1]
            path.append(scope)
            if not isinstance(scope, _SCOPES):
                continue
            if isinstance(scope, _FUNCS) and prev not in scope.body:
                continue
            if isinstance(scope, ast.Lambda) and prev is not scope.body:
                continue
            if isinstance(scope, _COMPS) and prev is scope.generators[0] and path[-3] is prev.iter:
                continue
            if node.id in _bindings(scope):
                return True
        return False

    # ---- the module's shape ------------------------------------------------------------------
    def _check_structure(self) -> None:
        funcs = {n.name: n for n in self.tree.body if isinstance(n, _FUNCS)}
        self.rep.kernels = [n for n, f in funcs.items()
                            if any(self._is_jit(d) for d in f.decorator_list)]
        # The entry is a function, or a class for suites whose contract is one (KernelBench's
        # ModelNew): an instance is never a tensor, so a class cannot pass as a function's output.
        entries = {**{n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}, **funcs}
        if self.entry not in entries:
            kind = "class" if self.entry[:1].isupper() else "function"
            self.bad(f"no top-level {kind} named {self.entry!r}")
        else:
            for d in entries[self.entry].decorator_list:
                name = ".".join(self._expand(d.func if isinstance(d, ast.Call) else d))
                if name not in _ENTRY_DECORATORS:
                    self.bad(f"decorates the entry function with {name or 'an expression'} "
                             "(a cache or a wrapper)")
        if not self.rep.kernels:
            self.bad("no @triton.jit kernel")
        self._check_kernel_calls(funcs)

    def _check_kernel_calls(self, funcs: dict[str, ast.AST]) -> None:
        """A kernel body calls only Triton (tl.*, other @triton.jit functions, methods of its
        values) and builtins. On a GPU anything else fails to compile; under the interpreter the
        body is plain Python, so a call to one of the module's own Python functions or classes
        would compute the answer on the host inside the 'kernel' and pass on the CPU alone."""
        jit = set(self.rep.kernels)
        plain = {n for n in funcs if n not in jit} | {
            n.name for n in self.tree.body if isinstance(n, ast.ClassDef)}
        for name in self.rep.kernels:
            local = _bindings(funcs[name])
            for node in _walk_local(funcs[name]):
                if isinstance(node, ast.Attribute) and node.attr in _INTERP_ATTRS:
                    self.bad(f"kernel {name} reads .{node.attr} (the interpreter's host arrays)")
                if not isinstance(node, ast.Call):
                    continue
                root = _parts(node.func)[:1]
                if root and root[0] in plain and root[0] not in local:
                    self.bad(f"kernel {name} calls {root[0]}, a Python function or class of the "
                             "module (a kernel may call only Triton and @triton.jit functions)")

    def _is_jit(self, dec: ast.AST) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        return self._expand(target) == ("triton", "jit")


_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, *_COMPS)


def _bindings(scope: ast.AST) -> set[str]:
    """Names a scope binds: parameters, stores, defs, imports and `except ... as` names."""
    names: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        names |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    body = scope.generators if isinstance(scope, _COMPS) else scope.body
    stack = list(body) if isinstance(body, list) else [body]
    declared: set[str] = set()
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            continue
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared |= set(n.names)
        if isinstance(n, (ast.Lambda, *_COMPS)):
            continue
        stack += list(ast.iter_child_nodes(n))
    return names - declared if not isinstance(scope, ast.Module) else names


_BUILTINS = frozenset(dir(__import__("builtins"))) - P.BANNED_NAMES
# Attributes of a kernel's values that exist only under the interpreter (numpy-backed handles).
_INTERP_ATTRS = frozenset({"handle", "data", "base"})


def _all_bindings(tree: ast.Module) -> set[str]:
    """Every name bound anywhere in the module: stores, parameters, defs, imports, handlers."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names |= set(n.names)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension,
                         ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return []


def _walk_local(node: ast.AST) -> list[ast.AST]:
    """The nodes of one block, not descending into nested functions or classes."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack += [c for c in ast.iter_child_nodes(n)
                  if not isinstance(c, (*_FUNCS, ast.ClassDef, ast.Lambda))]
    return out
