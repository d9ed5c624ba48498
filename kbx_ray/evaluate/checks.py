"""Static checks on candidate source (AST), run in the trusted parent before the code executes.

Violations disqualify the candidate; flags are observations kept on the record. The import list is
an allowlist, not a denylist: a Triton kernel needs torch, triton and a little of the standard
library, and nothing that reaches the OS, the network, threads or the interpreter's internals.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "triton.language", "math", "typing", "functools", "itertools",
    "dataclasses", "enum", "__future__", "collections", "numbers",
})
BANNED_NAMES = frozenset({
    "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr",
    "delattr", "getattr", "breakpoint", "input", "memoryview", "__builtins__", "help", "exit", "quit",
})
# Attribute chains that reach native code, side streams, the compiler stack or the checker.
BANNED_ATTRS = (
    "torch.ops", "torch._C", "torch.utils", "torch.library", "torch.compile", "torch._dynamo",
    "torch._inductor", "torch.backends", "torch.testing", "torch.cuda.Stream", "torch.cuda.stream",
    "torch.cuda.set_stream", "torch.cuda.Event", "torch.cuda.graph", "torch.cuda.CUDAGraph",
    "torch.multiprocessing", "torch.distributed", "torch.hub", "torch.load", "torch.save",
    "torch.jit", "torch.classes", "triton.testing", "triton.runtime", "triton.compiler",
    "triton.knobs", "tl.inline_asm_elementwise", "triton.language.inline_asm_elementwise",
)
SAFE_DUNDERS = frozenset({"__init__", "__name__", "__future__", "__call__", "__repr__"})
# Torch functions a candidate may call: allocation and views. Others are flagged as torch compute.
TORCH_ALLOC = frozenset({
    "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "empty_strided", "arange", "device", "Size", "is_tensor", "is_floating_point", "finfo", "iinfo",
    "dtype", "get_default_dtype", "broadcast_shapes", "cdiv", "next_power_of_2", "jit", "autotune",
    "Config", "heuristics", "constexpr", "is_available", "current_device", "get_device_properties",
})


@dataclass
class StaticReport:
    violations: list[str] = field(default_factory=list)  # disqualifying
    flags: list[str] = field(default_factory=list)       # recorded observations
    kernels: list[str] = field(default_factory=list)     # @triton.jit function names


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _is_jit(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return _dotted(target) in {"triton.jit", "jit"}


def static_check(tree: ast.Module, entry: str) -> StaticReport:
    rep = StaticReport()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                _check_import(a.name, rep)
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            _check_import(mod if node.level == 0 else "." + mod, rep)
            for a in node.names:
                aliases[a.asname or a.name] = f"{mod}.{a.name}"
                full = f"{mod}.{a.name}"
                if any(full == b or full.startswith(b + ".") for b in BANNED_ATTRS):
                    rep.violations.append(f"imports {full}")
        elif isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            rep.violations.append(f"uses the builtin {node.id!r}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr not in SAFE_DUNDERS:
                rep.violations.append(f"reaches the dunder attribute {node.attr!r}")
            full = _expand(_dotted(node), aliases)
            if any(full == b or full.startswith(b + ".") for b in BANNED_ATTRS):
                rep.violations.append(f"uses {full}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                full = _expand(_dotted(t), aliases) if isinstance(t, ast.Attribute) else ""
                if full.split(".")[0] in {"torch", "triton", "time", "math"}:
                    rep.violations.append(f"monkeypatches {full}")
        elif isinstance(node, ast.Try):
            for h in node.handlers:
                if not all(isinstance(s, ast.Raise) for s in h.body):
                    rep.violations.append("try/except that does not re-raise (a fallback)")
        elif isinstance(node, ast.Call):
            full = _expand(_dotted(node.func), aliases)
            if full.startswith("torch.") and full.split(".")[-1] not in TORCH_ALLOC:
                rep.flags.append(f"torch_call:{full}")
        elif isinstance(node, ast.Global):
            rep.flags.append("global_state")
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    rep.kernels = [n for n, f in funcs.items() if any(_is_jit(d) for d in f.decorator_list)]
    if entry not in funcs:
        rep.violations.append(f"no top-level function named {entry!r}")
    if not rep.kernels:
        rep.violations.append("no @triton.jit kernel")
    rep.violations = sorted(set(rep.violations))
    rep.flags = sorted(set(rep.flags))
    return rep


def _check_import(name: str, rep: StaticReport) -> None:
    if any(name == b or name.startswith(b + ".") for b in BANNED_ATTRS):
        rep.violations.append(f"imports {name}")
    elif name.startswith("."):
        rep.violations.append(f"relative import {name!r}")
    elif name not in ALLOWED_IMPORTS and name.split(".")[0] not in {"torch", "triton"}:
        rep.violations.append(f"imports {name!r} (allowed: torch, triton, math and typing helpers)")


def _expand(dotted: str, aliases: dict[str, str]) -> str:
    if not dotted:
        return ""
    head, _, rest = dotted.partition(".")
    base = aliases.get(head, head)
    if base == "triton.language":
        base = "tl"
    return f"{base}.{rest}" if rest else base
