"""Test code that calls a reference -> the calls it makes, each one a case for the evaluator.

KernelBench-X ships inputs as a program (a test function that builds `test_results`), while the
evaluator wants `make_inputs(case, seed, device) -> (args, kwargs)`. Running the program with the
reference wrapped by a recorder bridges the two: the recorded arguments of call i are case i's
inputs, and the `test_results` key that call i's output lands in is its name.
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from types import CodeType
from typing import Any, Callable

import torch

from kbx_ray.suites import shim

SMALL_NUMEL = 1 << 16     # cases whose inputs hold at most this many elements run on the CPU
_SEED_CALLS = {("torch", "manual_seed"), ("torch", "random", "manual_seed"),
               ("torch", "cuda", "manual_seed"), ("torch", "cuda", "manual_seed_all"),
               ("random", "seed"), ("np", "random", "seed"), ("numpy", "random", "seed")}
# the preamble's `sys.path.append(...)`: its helpers are served from the shim (kbx_tree.py)
_PATH_CALLS = {("sys", "path", m) for m in ("append", "insert", "extend")}


@dataclass
class Call:
    args: tuple
    kwargs: dict
    out: Any = None                  # kept only when surveying
    mutated: tuple[str, ...] = ()    # arguments the reference changed in place
    returned: tuple[str, ...] = ()   # arguments the reference returned itself (in place + return)


class _Unseed(ast.NodeTransformer):
    """`torch.manual_seed(42)` and friends -> `_kbx_no_seed(42)`: the evaluation seed rules; and
    `sys.path.append(...)` -> a no-op, so running the test code again leaves sys.path alone."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        parts, f = [], node.func
        while isinstance(f, ast.Attribute):
            parts.insert(0, f.attr)
            f = f.value
        if isinstance(f, ast.Name) and (f.id, *parts) in _SEED_CALLS | _PATH_CALLS:
            node.func = ast.copy_location(ast.Name("_kbx_no_seed", ast.Load()), node.func)
        return node


def compile_test(source: str, origin: str, first_line: int) -> CodeType:
    """The test code, its seeding calls neutralised, with line numbers as in the original file."""
    tree = _Unseed().visit(ast.parse(source))
    ast.increment_lineno(tree, first_line - 1)
    return compile(ast.fix_missing_locations(tree), origin, "exec", dont_inherit=True)


def record(reference: Callable[..., Any], name: str, ns: dict[str, Any], test: CodeType,
           seed: int, device: str, survey: bool = False) -> tuple[list[Call], Any]:
    """Run the test code once (seeded, on `device`) with `name` bound to a recorder around
    `reference`; its calls, arguments as they were before each call, and `test_results`
    (None when it assigns none)."""
    calls: list[Call] = []
    sig = inspect.signature(reference)

    def recorder(*args: Any, **kwargs: Any) -> Any:
        before = shim.clone((args, kwargs))
        out = reference(*args, **kwargs)
        mutated: tuple[str, ...] = ()
        returned: tuple[str, ...] = ()
        if survey:
            now = sig.bind(*args, **kwargs).arguments
            was = sig.bind(*before[0], **before[1]).arguments
            mutated = tuple(k for k, v in now.items()
                            if isinstance(v, torch.Tensor) and not _same(v, was[k]))
            outs = {id(t) for t in shim.tensors(out)}
            returned = tuple(k for k, v in now.items() if isinstance(v, torch.Tensor)
                             and id(v) in outs)
        calls.append(Call(before[0], before[1], out if survey else None, mutated, returned))
        return out

    scope = dict(ns, _kbx_no_seed=lambda *a, **k: None, __name__="__main__")
    scope[name] = recorder
    with shim.drawing_on(device, seed):
        exec(test, scope)  # noqa: S102 - the suite's own code, trusted like tasks/
    return calls, scope.get("test_results")


def cases_of(calls: list[Call], results: Any) -> list[dict]:
    """One case per call: named by the `test_results` key holding its output ("call_<i>" when
    none does), marked small when its inputs are (at least one case always is)."""
    items = results.items() if isinstance(results, dict) else enumerate(
        results if isinstance(results, (list, tuple)) else [results])
    owner: dict[int, str] = {}
    for key, value in items:
        for t in [*_objects(value), *shim.tensors(value)]:
            owner.setdefault(id(t), str(key))
    cases: list[dict] = []
    for i, c in enumerate(calls):
        base = next((owner[id(t)] for t in [*_objects(c.out), *shim.tensors(c.out)]
                     if id(t) in owner),
                    f"call_{i + 1}")
        name, n = base, 2
        while any(x["name"] == name for x in cases):
            name, n = f"{base}_{n}", n + 1
        numel = sum(t.numel() for t in shim.tensors((c.args, c.kwargs)))
        cases.append({"name": name, "small": numel <= SMALL_NUMEL, "call": i, "numel": numel,
                      "bytes": shim.nbytes((c.args, c.kwargs)) + shim.nbytes(c.out)})
    if cases and not any(c["small"] for c in cases):
        min(cases, key=lambda c: c["numel"])["small"] = True
    return cases


def _objects(value: Any) -> list[Any]:
    """A result that is an object (an optimizer, a dict of its state): matched by identity too;
    numbers and strings are not (their identities are shared)."""
    return [] if isinstance(value, (type(None), bool, int, float, complex, str, torch.Tensor)) \
        else [value]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    eq = (a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b
    return bool(eq.all())
