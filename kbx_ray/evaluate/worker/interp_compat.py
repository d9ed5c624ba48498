"""Make the Triton interpreter (CPU mode) judge honest kernels as a GPU would, or say it cannot.

Under TRITON_INTERPRET=1 four constructs that are right on a GPU went wrong, and were filed as the
candidate's fault:
- bfloat16: the interpreter keeps bf16 as raw uint16 bit patterns and runs numpy on them, so
  arithmetic, comparisons, min/max, reductions, scans, dot and fma computed on integers, and
  fp32 -> bf16 truncated. Here every compute op decodes bf16 to fp32 (exact), computes, and rounds
  back to nearest-even (fp32 has more than 2x8+2 bits, so one rounding gives the correctly rounded
  bf16 result); wider sources (fp64, integers) are rounded to odd at fp32 first.
- `@triton.autotune` with several configs benchmarks through the GPU driver: here the first config
  left after pruning is run once as its "benchmark" (its hooks run, in the open) and chosen.
- fp32 `tl.dot` computed exact whatever its input_precision; on a GPU the default is tf32: its
  inputs are rounded to tf32 here too (`to_tf32`), so a GEMM that fails its tolerance there fails here.
- `triton.language.extra.libdevice` is a module of stubs that return None outside the compiler:
  they and the CUDA libdevice functions dispatch here to numpy implementations by symbol.
- the interpreter runs a launch's programs one after another in row-major order, so a kernel that
  reads what an earlier program stored (a scan carried through a global buffer, a last program
  that combines the others' partials) passed; a GPU runs them in no set order. Each launch's
  programs now run in a secret shuffled order (`interp_order.py`).
What cannot be made right raises `InterpreterUnsupported` (a NotImplementedError), which leaves the
launch as such and is filed `unsupported_interpreter`. Only class attributes of the interpreter and
the existing names of the libdevice modules change: no new module-level name reaches a candidate.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

from kbx_ray.evaluate.worker import interp_order
from kbx_ray.evaluate.worker.interp_libdevice import MATH, lookup


class InterpreterUnsupported(NotImplementedError):
    """A construct that runs on a GPU but that the Triton interpreter cannot run faithfully."""


def bf16_to_f32(bits: Any) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16(x: Any, rtz: bool = False) -> np.ndarray:
    """bf16 bit patterns of `x` (any numpy dtype), rounded to nearest-even (or toward zero)."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if x.dtype in (np.float32, np.float16):
            f = x.astype(np.float32)
        else:  # round to odd at fp32 (24 bits >= 8 + 2), so that the final rounding is exact
            d = x.astype(np.float64)
            f = np.atleast_1d(d.astype(np.float32))
            d1 = np.atleast_1d(d)
            inexact = (f.astype(np.float64) != d1) & np.isfinite(d1)
            over = inexact & (np.abs(f.astype(np.float64)) > np.abs(d1))
            f[over] = np.nextafter(f[over], np.float32(0))
            f = (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32).reshape(d.shape)
        b = np.asarray(f).view(np.uint32)
        out = b >> np.uint32(16) if rtz else (
            (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
        return np.where(np.isnan(f), np.uint32(0x7FC0), out).astype(np.uint16)


def to_tf32(x: Any) -> np.ndarray:
    """fp32 values rounded to tf32 (10 mantissa bits, nearest-even; Inf and NaN kept): what a GPU's
    tensor cores compute an fp32 `tl.dot` on under input_precision="tf32", Triton's default on
    NVIDIA (TRITON_F32_DEFAULT and allow_tf32=False choose otherwise; the builder is handed the
    precision already resolved). "tf32x3" (split in three passes) is left exact, as "ieee"."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    bias = ((bits >> np.uint32(13)) & np.uint32(1)) + np.uint32(0x0FFF)
    return np.where(special, bits, (bits + bias) & np.uint32(0xFFFFE000)).view(np.float32)


def install() -> None:
    """Patch the interpreter in this (CPU worker) process; call once, before any candidate."""
    from triton.runtime import interpreter as it

    _install_bf16(it)
    _install_unsupported(it)
    _install_autotune()
    _install_libdevice(it)
    _install_global_rule(it)
    interp_order.install(it)


# ---- bfloat16 ----------------------------------------------------------------------------------
def _install_bf16(it: Any) -> None:
    import triton.language as tl
    from triton._C.libtriton import ir

    isbf, val, pack = _bf16_codec(it, tl)
    B = it.InterpreterBuilder
    orig = {k: getattr(B, k) for k in ("binary_op", "unary_op", "cast_impl", "create_fp_to_fp",
                                       "create_fma", "create_dot", "create_clampf",
                                       "create_atomic_rmw")}
    ops = {**_bf16_elementwise(it, tl, ir, orig, isbf, val, pack),
           **_bf16_reducing(it, ir, orig, isbf, val, pack)}
    for name, fn in ops.items():
        setattr(B, name, fn)
    _install_bf16_reductions(it, isbf)


def _bf16_codec(it: Any, tl: Any) -> tuple[Callable, Callable, Callable]:
    """(isbf, val, pack): is a handle bf16 bits, its values as fp32, a result back as a handle."""
    bf16 = tl.bfloat16

    def isbf(h: Any) -> bool:  # a comparison's handle keeps its operands' dtype: look at the data
        return getattr(h.dtype, "scalar", h.dtype) == bf16 and np.asarray(h.data).dtype == np.uint16

    def val(h: Any) -> np.ndarray:
        return bf16_to_f32(h.data) if isbf(h) else h.data

    def pack(out: Any, like: Any) -> Any:
        out = np.asarray(out)
        if out.dtype == np.bool_:
            return it.TensorHandle(out, tl.int1)
        if not np.issubdtype(out.dtype, np.floating):
            return it.TensorHandle(out, like.dtype.scalar)
        return it.TensorHandle(to_bf16(out), bf16)
    return isbf, val, pack


def _bf16_elementwise(it: Any, tl: Any, ir: Any, orig: dict, isbf: Callable, val: Callable,
                      pack: Callable) -> dict[str, Callable]:
    """Arithmetic, comparisons and casts on decoded values, rounded once back to bf16."""
    bf16 = tl.bfloat16
    fp8 = {tl.float8e5, tl.float8e5b16, tl.float8e4nv, tl.float8e4b8, tl.float8e4b15}

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Callable) -> Any:
        if not (isbf(lhs) or isbf(rhs)):
            return orig["binary_op"](self, lhs, rhs, op)
        with np.errstate(all="ignore"):
            return pack(op(val(lhs), val(rhs)), lhs)

    def unary_op(self: Any, arg: Any, op: Callable) -> Any:
        if not isbf(arg):
            return orig["unary_op"](self, arg, op)
        with np.errstate(all="ignore"):
            return pack(op(val(arg)), arg)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if (s == bf16) == (d == bf16):
            return orig["cast_impl"](self, src, dst_type)
        if d == bf16:
            return it.TensorHandle(to_bf16(src.data), bf16)
        with np.errstate(all="ignore"):
            return it.TensorHandle(val(src).astype(it._get_np_dtype(d)), d)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if d == bf16 and s not in fp8 and s != bf16:
            return it.TensorHandle(to_bf16(src.data, rtz=rounding_mode == ir.ROUNDING_MODE.RTZ), d)
        if s == bf16 and d not in fp8:
            return cast_impl(self, src, dst_type)
        if d == tl.float16 and s in (tl.float32, tl.float64) and rounding_mode != ir.ROUNDING_MODE.RTZ:
            return it.TensorHandle(src.data.astype(np.float16), d)  # numpy rounds to nearest-even
        return orig["create_fp_to_fp"](self, src, dst_type, rounding_mode)
    return {"binary_op": binary_op, "unary_op": unary_op, "cast_impl": cast_impl,
            "create_fp_to_fp": create_fp_to_fp}


def _bf16_reducing(it: Any, ir: Any, orig: dict, isbf: Callable, val: Callable,
                   pack: Callable) -> dict[str, Callable]:
    """fma, dot (tf32 inputs for fp32 too), clamp and atomics: one rounding of an exact result."""

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if not isbf(z):
            return orig["create_fma"](self, x, y, z)
        prod = np.multiply(val(x), val(y), dtype=np.float64)  # exact: 8 x 8 bits
        return pack(np.add(prod, val(z), dtype=np.float64), z)

    def create_dot(self: Any, a: Any, b: Any, d: Any, prec: Any, imprecise: Any) -> Any:
        if not (isbf(a) or isbf(b) or isbf(d)):
            if prec == ir.INPUT_PRECISION.TF32 and a.data.dtype == b.data.dtype == np.float32:
                a, b = (it.TensorHandle(to_tf32(h.data), h.dtype.scalar) for h in (a, b))
            return orig["create_dot"](self, a, b, d, prec, imprecise)
        acc = val(d)
        out = np.matmul(val(a), val(b), dtype=acc.dtype) + acc
        return pack(out, d) if isbf(d) else it.TensorHandle(out, d.dtype.scalar)

    def create_clampf(self: Any, arg: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        if not isbf(arg):
            return orig["create_clampf"](self, arg, lo, hi, propagate_nans)
        x, a, b = val(arg), val(lo), val(hi)
        out = (np.fmin(np.fmax(x, a), b) if propagate_nans == ir.PROPAGATE_NAN.NONE
               else np.clip(x, a, b))
        return pack(out, arg)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, value: Any, mask: Any, *a: Any) -> Any:
        if isbf(value):
            raise InterpreterUnsupported("atomics on bfloat16 are not supported by the Triton "
                                         "interpreter (CPU mode); they run on a GPU")
        return orig["create_atomic_rmw"](self, op, ptr, value, mask, *a)
    return {"create_fma": create_fma, "create_dot": create_dot, "create_clampf": create_clampf,
            "create_atomic_rmw": create_atomic_rmw}


def _install_bf16_reductions(it: Any, isbf: Callable) -> None:
    """Sums, scans and min/max reduce the decoded values in fp32 and round once."""
    R, S = it.ReduceOps, it.ScanOps
    r_sum, r_minmax, s_sum, s_prod = R.sum, R.min_max, S.cumsum, S.cumprod

    def sum_(self: Any, input: Any) -> Any:
        if not isbf(input.handle):
            return r_sum(self, input)
        out = np.sum(bf16_to_f32(input.handle.data), axis=self.axis, keepdims=self.keep_dims)
        return self.to_tensor(to_bf16(out), input.dtype)

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        x = input[0] if isinstance(input, tuple) else input
        if not isbf(x.handle):
            return r_minmax(self, input, val_reduce_op, idx_reduce_op)
        import triton.language as tl

        data = bf16_to_f32(x.handle.data)
        kw = {"axis": self.axis, "keepdims": self.keep_dims}
        v = val_reduce_op and self.to_tensor(to_bf16(val_reduce_op(data, **kw)), x.dtype)
        i = idx_reduce_op and self.to_tensor(idx_reduce_op(data, **kw), tl.int32)
        return (v, i) if v is not None and i is not None else (v if v is not None else i)

    def scan(orig: Callable, fn: Callable) -> Callable:
        def run(self: Any, input: Any) -> Any:
            if not isbf(input.handle):
                return orig(self, input)
            out = fn(bf16_to_f32(input.handle.data), axis=self.axis)
            return [self.to_tensor(to_bf16(out), dtype=input.dtype)]
        return run

    R.sum, R.min_max = sum_, min_max
    S.cumsum, S.cumprod = scan(s_sum, np.cumsum), scan(s_prod, np.cumprod)


# ---- unsupported constructs leave the launch as NotImplementedError -----------------------------
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
