"""libdevice symbols -> numpy implementations, for the Triton interpreter (CPU mode).

`triton.language.extra.libdevice` and the CUDA libdevice functions are stubs outside the compiler;
`interp_compat.py` routes their calls here by symbol (`lookup`: `__nv_expf` -> `exp`). Numpy and
the standard library only (the worker imports it on the CPU).
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Any, Callable

import numpy as np


def _vec(f: Callable) -> Callable:
    def g(*xs: Any) -> np.ndarray:
        def safe(*a: float) -> float:
            try:
                return f(*a)
            except OverflowError:
                return math.inf
            except (ValueError, ZeroDivisionError):  # a pole of gamma/lgamma, or outside the domain
                return math.inf if f is math.lgamma else math.nan
        return np.frompyfunc(safe, len(xs), 1)(*xs).astype(np.float64)
    return g


def _erfinv(x: float) -> float:
    if not -1.0 <= x <= 1.0:
        return math.nan
    if abs(x) == 1.0:
        return math.copysign(math.inf, x)
    y = statistics.NormalDist().inv_cdf((x + 1.0) / 2.0) / math.sqrt(2.0)
    for _ in range(2):  # Newton on erf: relative accuracy for tiny x too
        y -= (math.erf(y) - x) / (2.0 / math.sqrt(math.pi) * math.exp(-y * y))
    return y


def _ndtri(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    return statistics.NormalDist().inv_cdf(p)


_SQ2 = math.sqrt(2.0)
MATH: dict[str, Callable] = {
    "erf": _vec(math.erf), "erfc": _vec(math.erfc), "lgamma": _vec(math.lgamma),
    "tgamma": _vec(math.gamma), "erfinv": _vec(_erfinv),
    "erfcinv": _vec(lambda x: -_ndtri(x / 2.0) / _SQ2), "normcdf": _vec(lambda x: 0.5 * math.erfc(-x / _SQ2)),
    "normcdfinv": _vec(_ndtri), "remainder": _vec(math.remainder),
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1.0 / np.cbrt(x), "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x), "rint": np.rint,
    "nearbyint": np.rint, "fabs": np.abs, "abs": np.abs, "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x), "saturate": lambda x: np.nan_to_num(np.clip(x, 0, 1)),
    "logb": lambda x: np.floor(np.log2(np.abs(x))), "cyl_bessel_i0": np.i0,
    "isnan": np.isnan, "isinf": np.isinf, "finite": np.isfinite, "isfinite": np.isfinite,
    "signbit": np.signbit, "pow": np.power, "powi": np.power, "atan2": np.arctan2,
    "hypot": np.hypot, "rhypot": lambda x, y: 1.0 / np.hypot(x, y), "fmod": np.fmod,
    "copysign": np.copysign, "fdim": lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x - y), x - y, 0.0)),
    "div_rn": np.divide, "fast_fdivide": np.divide, "add_rn": np.add, "sub_rn": np.subtract,
    "mul_rn": np.multiply, "rcp_rn": lambda x: 1.0 / x, "sqrt_rn": np.sqrt, "ldexp": np.ldexp,
    "scalbn": np.ldexp, "fma": lambda x, y, z: x * y + z
}
_ALIASES = {"llabs": "abs", "fmaf_rn": "fma", "fma_rn": "fma", "isnand": "isnan", "isinfd": "isinf",
            "signbitd": "signbit", "isfinited": "isfinite", "finitef": "finite", "powif": "powi",
            "fast_fdividef": "fast_fdivide", "cyl_bessel_i0f": "cyl_bessel_i0"}
_CONVERT = re.compile(r"(float|double)2(int|uint|ll|ull)_(rn|rz|rd|ru)$")


def lookup(symbol: str) -> Callable | None:
    s = symbol.removeprefix("__nv_")
    s = _ALIASES.get(s, s)
    for cand in (s, s[:-1] if s.endswith("f") else "", s[1:] if s[:1] in "fd" else "",
                 s.removeprefix("fast_")[:-1] if s.startswith("fast_") else ""):
        if cand and MATH.get(cand) is not None:
            return MATH[cand]
    m = _CONVERT.match(s)
    if m:
        return {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[m.group(3)]
    return None
