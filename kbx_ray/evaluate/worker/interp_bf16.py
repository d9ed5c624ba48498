"""The Triton interpreter's bfloat16 and tf32, made as a GPU's (a part of `interp_compat.py`).

The interpreter keeps bf16 as raw uint16 bit patterns and runs numpy on them: here every compute op
decodes bf16 to fp32 (exact), computes, and rounds back to nearest-even (wider sources rounded to
odd at fp32 first); an fp32 `tl.dot` under tf32 gets its inputs rounded to tf32 (`to_tf32`).
Numpy and triton only (the CPU worker imports it).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


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


def install(it: Any) -> None:
    """bf16 computed as real bf16 on the interpreter's builder (its class attributes only)."""
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
