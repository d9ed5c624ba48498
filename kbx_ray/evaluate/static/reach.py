"""What candidate source reaches by name, attribute and store: builtins, dunders, private and
banned attributes, module chains resolved against the real torch and triton, modules passed around
as values, and monkeypatching (an attribute or item store outside `self`/`cls`). One family of the
static checks (`checks.py`). Standard library, torch and triton only.
"""
from __future__ import annotations

import ast

from kbx_ray.evaluate.static import policy as P
from kbx_ray.evaluate.static.aliases import AliasScope
from kbx_ray.evaluate.static.resolve import resolve_chain, walk
from kbx_ray.evaluate.static.scopes import COMPS, FUNCS, SCOPES, bindings, parts
from kbx_ray.evaluate.static.value_attrs import value_attr_refused

_BUILTINS = frozenset(dir(__import__("builtins"))) - P.BANNED_NAMES


class ReachChecks(AliasScope):
    def _name(self, node: ast.Name) -> None:
        name = node.id
        if name in P.BANNED_NAMES and isinstance(node.ctx, ast.Load) and not self._shadowed(node):
            if not ((name == "type" and self._type_for_display(node))
                    or (name == "locals" and self._membership_test(node))):
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
        attr, root = node.attr, parts(node)[:1]
        own = root in (["self"], ["cls"]) and root[0] not in self.aliases
        if self._class_annotation(node):
            return  # `x_ptr: tl.pointer_type`: Triton reads a class annotation as no type at all
        if (own or (isinstance(node.value, ast.Name) and (id(node.value) in self.ctx_names
                                                           or self._parameter(node.value)))) \
                and attr in P.MODULE_ALIASES | P.DANGER_MODULES and attr != "numpy" \
                and not attr.startswith("_"):
            return  # `ctx.reduction`, `self.path`, `args.reduction`: an object the call was handed
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in P.SAFE_DUNDER_ATTRS:
                self.bad(f"reaches the dunder attribute {attr!r}")
        elif attr.startswith("_") and not own:
            self.bad(f"reaches the private attribute {attr!r}")
        why = P.banned_attr_name(attr)
        if why and not (attr == "data_ptr" and self._same_address_test(node)):
            self.bad(why)
        self._value_attribute(node)
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
            root = parts(t)[:1]
            if isinstance(t.value, ast.Name) and id(t.value) in self.ctx_names:
                return  # `ctx.beta = beta` in an autograd Function: the ctx object is its own
            if t.attr == "requires_grad" and self._local_name(t.value):
                return  # a flag on the candidate's own local tensor
            if root not in (["self"], ["cls"]) or root[0] in self.aliases:
                what = ".".join(self._expand(t) or parts(t)) or f"attribute {t.attr!r}"
                self.bad(f"monkeypatches {what} (assigns to an object it does not own)")
        elif isinstance(t, ast.Subscript) and self._expand(t.value):
            what = ".".join(self._expand(t.value))
            self.bad(f"monkeypatches {what} (assigns into library state)")


    def _value_attribute(self, node: ast.Attribute) -> None:
        """An attribute read on a runtime value (no module chain, not `self.x`/`cls.x`) must be
        one a value type the candidate may hold has, or one it defines itself
        (`value_attrs.value_attr_refused`): file writers of other types are refused as a class."""
        if not isinstance(node.ctx, ast.Load) or self._expand(node) or P.banned_attr_name(node.attr):
            return  # a module chain is resolved; a banned name is refused already
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            return
        why = value_attr_refused(node.attr, self._own_attrs())
        if why:
            self.bad(why)

    def _own_attrs(self) -> frozenset[str]:
        """Attribute names the candidate defines: its classes' members, the attributes it
        stores (`self.x = ...`, `ctx.x = ...`) and its namedtuples' fields."""
        own = getattr(self, "_own", None)
        if own is None:
            names: set[str] = set()
            for n in ast.walk(self.tree):
                if isinstance(n, ast.ClassDef):
                    for stmt in n.body:
                        names |= bindings_of(stmt)
                elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    names.add(n.attr)
                elif isinstance(n, ast.Call) and parts(n.func)[-1:] == ["namedtuple"]:
                    names |= _field_names(n)
            own = self._own = frozenset(names)
        return own

    def _class_annotation(self, node: ast.Attribute) -> bool:
        """`node` is a whole type annotation (a parameter's, a variable's or a return's) naming a
        class (`tl.pointer_type`, `tl.tensor`): Triton's JIT turns a class into its name, which
        specialises nothing. An instance (`tl.pointer_type(tl.int64)`, `tl.pi32_t`) declares the
        parameter a pointer, so an integer handed there would become an address: still refused."""
        up = self.parent.get(id(node))
        if not ((isinstance(up, ast.arg) and up.annotation is node)
                or (isinstance(up, ast.AnnAssign) and up.annotation is node)
                or (isinstance(up, FUNCS) and getattr(up, "returns", None) is node)):
            return False
        chain = self._expand(node)
        return bool(chain) and chain[0] in P.ROOTS and isinstance(walk(list(chain)), type)

    def _same_address_test(self, node: ast.Attribute) -> bool:
        """`a.data_ptr() == b.data_ptr()` (or `!=`): do two tensors start at the same byte, the
        aliasing test LLM kernels write for in-place and `out=` arguments. The comparison yields
        a bool, never an address: no number reaches a kernel, a value or an output, and equality
        between the candidate's own tensors tells nothing it did not make itself (a view cannot
        be placed outside its storage). Any other use of `data_ptr` stays refused
        (INTEGRITY.md class 1)."""
        call = self.parent.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node):
            return False
        cmp = self.parent.get(id(call))
        return (isinstance(cmp, ast.Compare) and len(cmp.ops) == 1
                and isinstance(cmp.ops[0], (ast.Eq, ast.NotEq))
                and all(_address_of(side) for side in (cmp.left, *cmp.comparators)))

    def _parameter(self, node: ast.Name) -> bool:
        """`node` names a parameter of the function it is read in (the call's own argument: the
        harness hands tensors and numbers, no object with a module attribute but `numpy`)."""
        up = self.parent.get(id(node))
        while up is not None and not isinstance(up, FUNCS):
            up = self.parent.get(id(up))
        return (up is not None and node.id not in self.aliases
                and node.id in {a.arg for a in ast.walk(up.args) if isinstance(a, ast.arg)})

    def _local_name(self, node: ast.AST) -> bool:
        """`node` is a plain name bound in the function it is stored from (a parameter or a local
        of the candidate's own), not a module, a global or a name declared global/nonlocal."""
        if not isinstance(node, ast.Name) or node.id in self.aliases:
            return False
        up = self.parent.get(id(node))
        while up is not None and not isinstance(up, FUNCS):
            up = self.parent.get(id(up))
        return up is not None and node.id in bindings(up)

    def _membership_test(self, node: ast.Name) -> bool:
        """`'x' in locals()` inside a function: a bool about the function's own names (a copy of
        them; nothing written to it reaches a frame). At module level it is the module's globals."""
        call = self.parent.get(id(node))
        cmp = self.parent.get(id(call))
        up = cmp
        while up is not None and not isinstance(up, FUNCS):
            up = self.parent.get(id(up))
        return (isinstance(call, ast.Call) and call.func is node and not call.args
                and isinstance(cmp, ast.Compare) and cmp.comparators == [call]
                and isinstance(cmp.ops[0], (ast.In, ast.NotIn)) and up is not None)

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


    def _shadowed(self, node: ast.Name) -> bool:
        """True when the name is bound by the candidate in a scope it is read from (a parameter
        named `input`), so it does not refer to the builtin. Defaults and decorators belong to the
        enclosing scope, and a comprehension's first iterable too."""
        path: list[ast.AST] = [node]
        while id(path[-1]) in self.parent:
            scope = self.parent[id(path[-1])]
            prev = path[-1]
            path.append(scope)
            if not isinstance(scope, SCOPES):
                continue
            if isinstance(scope, FUNCS) and prev not in scope.body:
                continue
            if isinstance(scope, ast.Lambda) and prev is not scope.body:
                continue
            if isinstance(scope, COMPS) and prev is scope.generators[0] and path[-3] is prev.iter:
                continue
            if node.id in bindings(scope):
                return True
        return False


def bindings_of(stmt: ast.stmt) -> set[str]:
    """Names a class-body statement binds (a def, a class, an assignment's plain names)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        tgts = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in tgts for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _field_names(call: ast.Call) -> set[str]:
    """A namedtuple's field names written as literals ("a b" or ["a", "b"])."""
    if len(call.args) < 2:
        return set()
    spec = call.args[1]
    if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        return set(spec.value.replace(",", " ").split())
    if isinstance(spec, (ast.List, ast.Tuple)):
        return {e.value for e in spec.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _address_of(node: ast.AST) -> bool:
    """`<expr>.data_ptr()` with no arguments."""
    return (isinstance(node, ast.Call) and not node.args and not node.keywords
            and isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr")
