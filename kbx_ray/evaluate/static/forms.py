"""The candidate module's forms: exception fallbacks, hooks and metaclasses, tensor subclasses,
format strings, the entry function and its decorators, and what a kernel body may call. One family
of the static checks (`checks.py`). Standard library, torch and triton only.
"""
from __future__ import annotations

import ast
import re

from kbx_ray.evaluate.static import policy as P
from kbx_ray.evaluate.static.aliases import AliasScope
from kbx_ray.evaluate.static.policy import MISSING
from kbx_ray.evaluate.static.resolve import walk
from kbx_ray.evaluate.static.scopes import FUNCS, bindings, parts, targets, walk_local

_FORMAT_FIELD = re.compile(r"\{[^{}!:]*[.\[]")
_ENTRY_DECORATORS = {"torch.no_grad", "torch.inference_mode"}
# Attributes of a kernel's values that exist only under the interpreter (numpy-backed handles).
_INTERP_ATTRS = frozenset({"handle", "data", "base"})


_VIEWS = frozenset({"where", "broadcast_to", "reshape", "view", "expand_dims", "permute", "trans",
                    "join", "cat", "multiple_of", "max_contiguous", "max_constancy"})


def _ptrish(e: ast.AST, ptrs: set[str]) -> bool:
    """`e` may be pointer-valued: a name in `ptrs`, or sums, selections and views of one."""
    if isinstance(e, ast.Name):
        return e.id in ptrs
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _ptrish(e.left, ptrs) or _ptrish(e.right, ptrs)
    if isinstance(e, ast.IfExp):
        return _ptrish(e.body, ptrs) or _ptrish(e.orelse, ptrs)
    if isinstance(e, (ast.Subscript, ast.Starred)):
        return _ptrish(e.value, ptrs)
    if isinstance(e, (ast.Tuple, ast.List)):
        return any(_ptrish(x, ptrs) for x in e.elts)
    if isinstance(e, ast.Call):
        f = e.func
        fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if fname in _VIEWS:
            recv = [f.value] if isinstance(f, ast.Attribute) else []
            return any(_ptrish(x, ptrs) for x in [*recv, *e.args])
    return False


_MEMORY = frozenset({"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_and",
                     "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas",
                     "make_tensor_descriptor", "make_block_ptr"})


_CASTS = frozenset({"cast", "full", "zeros", "bitcast", "to"})


def _derived(body: list[ast.AST], ptrs: set[str]) -> set[str]:
    """`ptrs` and the local names pointer arithmetic on them binds (a few rounds: loops)."""
    ptrs = set(ptrs)
    for _ in range(4):
        for n in body:
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                if _ptrish(n.value, ptrs) or (isinstance(n, ast.AugAssign)
                                              and _ptrish(n.target, ptrs)):
                    ptrs |= {t.id for t in tgts if isinstance(t, ast.Name)}
    return ptrs


class FormChecks(AliasScope):
    def _try(self, node: ast.AST) -> None:
        for h in getattr(node, "handlers", []):
            if not all(isinstance(s, ast.Raise) for s in h.body):
                self.bad("try/except that does not re-raise (a fallback)")
        for stmt in getattr(node, "finalbody", []):
            for sub in walk_local(stmt):
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
        if isinstance(node.func, ast.Name) and node.func.id == "super" and "super" not in self.aliases:
            self._super(node)
        chain = self._expand(node.func)
        if chain and chain[0] == "torch" and chain[-1] not in P.TORCH_ALLOC:
            self.rep.flags.append(f"torch_call:{'.'.join(chain)}")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            recv = node.func.value
            if not (isinstance(recv, ast.Constant) and isinstance(recv.value, str)):
                self.bad("calls .format on a computed string")
            elif _FORMAT_FIELD.search(recv.value):
                self.bad("a format string that reads attributes or items of its arguments")


    def _super(self, node: ast.Call) -> None:
        """`super(torch.Tensor, x).tolist()` reaches a base class's readers, which no wrapper on
        torch.Tensor sees (INTEGRITY.md class 4): only the plain `super()` of a method of a class
        the candidate defines is admitted."""
        if node.args or node.keywords:
            self.bad("calls super(...) with arguments (reaches a base class's methods on any value)")
            return
        up = self.parent.get(id(node))
        while up is not None and not isinstance(up, FUNCS):
            up = self.parent.get(id(up))
        if up is None or not isinstance(self.parent.get(id(up)), ast.ClassDef):
            self.bad("calls super() outside a method of a class the module defines")

    # ---- the module's shape ------------------------------------------------------------------
    def _check_structure(self) -> None:
        funcs = {n.name: n for n in self.tree.body if isinstance(n, FUNCS)}
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
            local = bindings(funcs[name])
            self._pointer_types(name, funcs[name])
            # the body only: decorator arguments (`autotune(configs=helper())`) run on the host
            for node in (n for stmt in funcs[name].body for n in walk_local(stmt)):
                if isinstance(node, ast.Attribute) and node.attr in _INTERP_ATTRS:
                    self.bad(f"kernel {name} reads .{node.attr} (the interpreter's host arrays)")
                if not isinstance(node, ast.Call):
                    continue
                root = parts(node.func)[:1]
                if root and root[0] in plain and root[0] not in local:
                    self.bad(f"kernel {name} calls {root[0]}, a Python function or class of the "
                             "module (a kernel may call only Triton and @triton.jit functions)")

    def _pointer_types(self, name: str, fn: ast.AST) -> None:
        """A kernel may not name the type of a pointer (`x.to(y_ptr.dtype)`, `tl.cast(a,
        p.type)`): cast to it, an integer becomes an address no argument handed over
        (INTEGRITY.md class 1). `.dtype.element_ty` (the element type) and comparisons stay
        allowed. Pointers are the parameters and what pointer arithmetic, `where` and views make
        of them."""
        body = walk_local(fn)
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        rebound = {t.id for n in body for t in targets(n) if isinstance(t, ast.Name)}
        for a in ast.walk(fn.args):
            ann = getattr(a, "annotation", None) if isinstance(a, ast.arg) else None
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and "*" in ann.value:
                self.bad(f"kernel {name} declares {a.arg} a pointer by the string {ann.value!r} "
                         "(an integer handed there would become an address)")
        used = [c.args[0] for c in body if isinstance(c, ast.Call) and c.args and (
            getattr(c.func, "attr", getattr(c.func, "id", "")) in _MEMORY)]
        ptrs = {p for p in params if any(_ptrish(u, _derived(body, {p})) for u in used)}
        ptrs = _derived(body, ptrs)
        casts = {id(a) for c in body if isinstance(c, ast.Call) and getattr(
            c.func, "attr", getattr(c.func, "id", "")) in _CASTS for a in c.args[1:]}
        casts |= {id(c.args[0]) for c in body if isinstance(c, ast.Call) and c.args
                  and getattr(c.func, "attr", "") == "to"}
        casts |= {id(k.value) for c in body if isinstance(c, ast.Call) for k in c.keywords
                  if k.arg in ("dtype", "dst_ty")}
        casts |= self._cast_by_name(body, params, casts)
        for n in body:
            if (isinstance(n, ast.Attribute) and n.attr in ("dtype", "type")
                    and (_ptrish(n.value, ptrs) or (id(n) in casts and _ptrish(n.value, params)))
                    and not isinstance(self.parent.get(id(n)), (ast.Attribute, ast.Compare))):
                self.bad(f"kernel {name} names the pointer type {ast.unparse(n)} (a cast to it "
                         "turns an integer into an address)")
            if n is not fn and isinstance(n, ast.Attribute) and n.attr == "type" and isinstance(
                    self.parent.get(id(n)), ast.Attribute) and _ptrish(n.value, ptrs) and (
                    self.parent[id(n)].attr in ("element_ty", "scalar")) and not (
                    isinstance(n.value, ast.Name) and n.value.id in params - rebound):
                # a block of pointers' element type is a pointer; a parameter is one pointer,
                # whose `.type.element_ty` is its element type (`y.to(out_ptr.type.element_ty)`)
                self.bad(f"kernel {name} names the pointer type {ast.unparse(self.parent[id(n)])}")

    def _cast_by_name(self, body: list[ast.AST], params: set[str], casts: set[int]) -> set[int]:
        """The `<argument>.dtype`/`.type` attributes bound to a name that is then a cast target
        (`T = spare.dtype` ... `.to(T)`; through renamings too): they are cast targets as if
        written in the cast (d1p_dtype_alias_cast_sigmoid)."""
        binds: dict[str, list[ast.AST]] = {}  # name -> the attributes (or names) bound to it
        for n in body:
            if isinstance(n, ast.Assign) and (
                    (isinstance(n.value, ast.Attribute) and n.value.attr in ("dtype", "type")
                     and isinstance(n.value.value, ast.Name) and n.value.value.id in params)
                    or isinstance(n.value, ast.Name)):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        binds.setdefault(t.id, []).append(n.value)
        cast_names = {n.id for n in body if isinstance(n, ast.Name) and id(n) in casts}
        out: set[int] = set()
        while cast_names:
            vals = [v for name in cast_names for v in binds.pop(name, [])]
            out |= {id(v) for v in vals if isinstance(v, ast.Attribute)}
            cast_names = {v.id for v in vals if isinstance(v, ast.Name)}
        return out

    def _is_jit(self, dec: ast.AST) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        return self._expand(target) == ("triton", "jit")
