"""Numbers that left a tensor for the host, marked: int and float subclasses that stay marked
through arithmetic (every numeric dunder, reflected ones included, `round/abs/divmod/pow`), `read`
(from input-derived data) or `input` (the call's own float arguments). A conversion that makes a
marked float plain keeps its value (`LAUNDERED`). Where they may go is `host_values.py`'s to
decide. Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

from typing import Any

from kbx_ray.evaluate.worker.ledger import MONITOR

READ, INPUT = "read", "input"
LAUNDERED: dict[float, str] = {}  # float values of marked numbers that a conversion made plain
_TRIVIAL = frozenset({0.0, 1.0, -1.0})


_BINARY = ("add sub mul truediv floordiv mod pow lshift rshift and or xor divmod").split()
_UNARY = ("neg", "pos", "abs", "invert", "trunc", "floor", "ceil")


def _make(base: type, kind: str) -> type:
    ns: dict[str, Any] = {"__slots__": (), "_kbx_kind": kind}

    def binop(name: str) -> Any:
        f = getattr(base, name)

        def op(self: Any, other: Any, *mod: Any) -> Any:
            r = f(self, other, *mod)
            return r if r is NotImplemented else mark(r, _join(self, other))
        op.__name__ = name
        return op

    for stem in _BINARY:
        for name in (f"__{stem}__", f"__r{stem}__"):
            if hasattr(base, name):
                ns[name] = binop(name)
    for stem in _UNARY:
        if hasattr(base, f"__{stem}__"):
            f = getattr(base, f"__{stem}__")
            ns[f"__{stem}__"] = (lambda f: lambda self: mark(f(self), _KIND[type(self)]))(f)

    def _round(self: Any, *nd: Any) -> Any:
        return mark(base.__round__(self, *nd), kind)

    def _conj(self: Any) -> Any:
        return self

    def _plain(name: str) -> Any:
        f = getattr(base, name)

        def conv(self: Any, *a: Any) -> Any:
            if base is float:
                note(float.__float__(self), kind)
            return f(self, *a)
        conv.__name__ = name
        return conv

    ns["__round__"], ns["conjugate"] = _round, _conj
    ns["real"] = property(_conj)
    ns["imag"] = property(lambda self: mark(base(0), kind))
    for name in ("__int__", "__float__", "__index__", "__str__", "__repr__", "__format__", "hex",
                 "as_integer_ratio", "to_bytes"):
        if hasattr(base, name):
            ns[name] = _plain(name)
    if base is int:
        ns["numerator"] = property(_conj)
        ns["denominator"] = property(lambda self: mark(1, kind))
    return type(f"{kind.capitalize()}{base.__name__.capitalize()}", (base,), ns)


ReadInt, ReadFloat = _make(int, READ), _make(float, READ)
InputInt, InputFloat = _make(int, INPUT), _make(float, INPUT)
_KIND = {ReadInt: READ, ReadFloat: READ, InputInt: INPUT, InputFloat: INPUT}
_CLS = {(int, READ): ReadInt, (float, READ): ReadFloat, (int, INPUT): InputInt,
        (float, INPUT): InputFloat}


def kind_of(v: Any) -> str | None:
    """READ, INPUT or None (a plain number, or anything else)."""
    return _KIND.get(type(v))


def _join(a: Any, b: Any) -> str | None:
    ka, kb = _KIND.get(type(a)), _KIND.get(type(b))
    return READ if READ in (ka, kb) else ka or kb


def mark(v: Any, kind: str | None) -> Any:
    """`v` with its numbers marked `kind` (lists and tuples element by element; bools, complex
    numbers and everything else as they are)."""
    if kind is None:
        return v
    t = type(v)
    if t is bool:
        return v
    if isinstance(v, int):
        return _CLS[int, kind](int.__int__(v))
    if isinstance(v, float):
        return _CLS[float, kind](float.__float__(v))
    if t is list:
        return [mark(x, kind) for x in v]
    if t is tuple:
        return tuple(mark(x, kind) for x in v)
    return v


def plain(v: Any) -> Any:
    """`v` with every marked number made a plain int/float again (what Triton is handed)."""
    t = type(v)
    if t in _KIND:
        return int.__int__(v) if isinstance(v, int) else float.__float__(v)
    if t is tuple or t is list:
        return t(plain(x) for x in v) if _has_marked(v) else v
    return v


def _has_marked(v: Any) -> bool:
    return any(type(x) in _KIND or (type(x) in (list, tuple) and _has_marked(x)) for x in v)


def note(value: float, kind: str) -> None:
    """A conversion made a marked float (or a float tensor's value) plain: keep its value."""
    if MONITOR.watching() and value == value and value not in _TRIVIAL:
        if LAUNDERED.get(value) != READ:
            LAUNDERED[value] = kind
