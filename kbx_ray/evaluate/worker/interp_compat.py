"""Make the Triton interpreter (CPU mode) judge honest kernels as a GPU would, or say it cannot.
More: kbx_ray/evaluate/worker/README.md, `interp_compat.py`.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

from kbx_ray.evaluate.worker import interp_bf16, interp_order
from kbx_ray.evaluate.worker.interp_bf16 import InterpreterUnsupported
from kbx_ray.evaluate.worker.interp_libdevice import MATH, lookup


def install() -> None:
    """Patch the interpreter in this (CPU worker) process; call once, before any candidate."""
    from triton.runtime import interpreter as it

    interp_bf16.install(it)
    _install_unsupported(it)
    _install_autotune()
    _install_libdevice(it)
    _install_global_rule(it)
    interp_order.install(it)


def _install_unsupported(it: Any) -> None:
    """The interpreter wraps every error of a launch in InterpreterError; one whose cause is a
    NotImplementedError (ours, or the interpreter's own inline_asm/extern) is re-raised as such."""
    G = it.GridExecutor
    call = G.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self, *args, **kwargs)
        except it.InterpreterError as e:
            cause: BaseException | None = e
            while cause is not None and not isinstance(cause, NotImplementedError):
                cause = cause.__cause__
            if cause is None:
                raise
            if isinstance(cause, InterpreterUnsupported):
                raise InterpreterUnsupported(str(cause)) from None
            import triton

            raise InterpreterUnsupported(f"not supported by the Triton interpreter (CPU mode, triton "
                                         f"{triton.__version__}): {cause}") from None

    G.__call__ = __call__


# ---- globals a kernel may read ----------------------------------------------------------------
def _install_global_rule(it: Any) -> None:
    """Triton's compiler lets a kernel read a module global only if it is a constexpr value, a
    module, a jit function, a dtype, a triton.language object or a builtin; the interpreter reads
    any. `X: tl.constexpr = 1.0` (an annotation, not a constexpr) passed here and failed to compile
    on the H200, so the compiler's rule is applied before a function is first interpreted."""
    F = it.InterpretedFunction
    rewrite, checked = F.rewrite, set()

    def checked_rewrite(self: Any) -> Any:
        if self.fn not in checked:
            name = refused_global(self.fn)
            if name is not None:
                raise NameError(f"Cannot access global variable {name} from within @jit'ed function. "
                                "Triton kernels can only access global variables that are "
                                "instantiated as constexpr (`x = triton.language.constexpr(42)`); "
                                "annotating one (`x: triton.language.constexpr = 42`) is not "
                                "supported (as on a GPU)")
            checked.add(self.fn)
        return rewrite(self)

    F.rewrite = checked_rewrite


def refused_global(fn: Callable) -> str | None:
    """The first global `fn` reads that Triton's compiler would refuse (None if all are allowed)."""
    import ast
    import inspect
    import textwrap
    from types import ModuleType

    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    if os.environ.get("TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "") not in ("", "0"):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    defn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if defn is None:
        return None
    local = {a.arg for a in ast.walk(defn.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(defn) if isinstance(n, ast.Name)
              and not isinstance(n.ctx, ast.Load)}
    builtin = {"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr", "print",
               "min", "max"}
    absent, scope = object(), fn.__globals__
    body = [n for stmt in defn.body for n in ast.walk(stmt)]  # not the decorators or arg defaults
    for n in body:
        if not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load) or n.id in local | builtin:
            continue
        val = scope.get(n.id, absent)
        if (val is absent or val is None or type(val) is ModuleType
                or isinstance(val, (tl.constexpr, tl.dtype, InterpretedFunction))
                or getattr(val, "__triton_builtin__", False)
                or getattr(val, "__triton_aggregate__", False)
                or str(getattr(val, "__module__", "") or "").startswith("triton.")
                or (isinstance(val, tuple) and hasattr(type(val), "_fields"))):
            continue
        return n.id
    return None


# ---- autotune ----------------------------------------------------------------------------------
def _install_autotune() -> None:
    import weakref

    from triton.runtime.autotuner import Autotuner

    first: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    prune, bench = Autotuner.prune_configs, Autotuner._bench

    def prune_configs(self: Any, kwargs: dict) -> list:
        configs = prune(self, kwargs)  # prune_configs_by and perf_model run as on a GPU
        first[self] = configs[0]
        return configs

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
        if first.get(self) is not config:
            return [math.inf] * 3
        return bench(self, *args, config=config, **meta)  # runs kernel_call once, with its hooks

    def run_once(kernel_call: Callable, quantiles: Any = None) -> list[float]:
        kernel_call()
        return [0.0, 0.0, 0.0]

    Autotuner.prune_configs, Autotuner._bench = prune_configs, _bench
    Autotuner.do_bench = property(lambda self: run_once)


# ---- libdevice ---------------------------------------------------------------------------------
def _install_libdevice(it: Any) -> None:
    import triton.language.extra.libdevice as generic

    try:
        from triton.language.extra.cuda import libdevice as cuda
    except ImportError:  # pragma: no cover - a build without the CUDA backend
        return
    sem = it.interpreter_semantic

    def extern(self: Any, lib: str, path: str, symbol: str, args: list, ret: Any, pure: bool) -> Any:
        fn = lookup(symbol)
        if fn is None:
            raise InterpreterUnsupported(f"libdevice {symbol} has no implementation under the "
                                         "Triton interpreter (CPU mode); it runs on a GPU")
        rty = getattr(ret, "scalar", ret)
        with np.errstate(all="ignore"):
            if fn is MATH["fma"]:  # rounds once: a product and a sum in float64 would round twice
                fma = it._interpreter.fma_fp32 if rty == it.tl.float32 else it._interpreter.fma_fp64
                out = fma(*np.broadcast_arrays(*(a.data for a in args)))
            else:
                out = fn(*(a.data.astype(np.float64) if a.data.dtype.kind == "f" else a.data
                           for a in args))
            return it.TensorHandle(np.asarray(out).astype(it._get_np_dtype(rty)), rty)

    it.InterpreterBuilder.create_extern_elementwise = extern

    def bind(f: Callable) -> Callable:
        def call(*args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
            return f(*args, _semantic=_semantic or sem, **kwargs)
        call.__name__ = call.__qualname__ = f.__name__
        return call

    for name, f in list(vars(cuda).items()):
        if callable(f) and getattr(f, "__triton_builtin__", False):
            setattr(cuda, name, bind(f))
            if callable(getattr(generic, name, None)):
                setattr(generic, name, getattr(cuda, name))
