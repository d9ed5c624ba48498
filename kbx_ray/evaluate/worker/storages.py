"""A tensor -> facts about its storage that the runtime guards key on: its address (`ptr`), its
layout as the call received it, whether it covers its whole storage, holds one value or integers.
Standard library and torch only (the worker imports it).
"""
from __future__ import annotations

from typing import Any


def ptr(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return 0


def whole(t: Any) -> bool:
    """`t` covers its whole storage, each byte once (dense and non-overlapping, any order)."""
    try:
        if t.storage_offset() or t.numel() * t.element_size() != t.untyped_storage().nbytes():
            return False
        expected = 1
        for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.shape) if n > 1):
            if stride != expected:
                return False
            expected *= size
        return True
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return False


def integral(t: Any) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def layout(t: Any) -> tuple:
    return (ptr(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def one_value(t: Any) -> bool:
    """A one-element storage: reading an input that is one (a scalar parameter passed as a tensor)
    is not reading a result. Only inputs qualify: a one-element clone of input data does not."""
    try:
        return t.untyped_storage().nbytes() <= t.element_size()
    except Exception:  # noqa: BLE001
        return False
