"""State that belongs to one asyncio event loop, made again when the running loop is another one.

asyncio queues, conditions, locks and HTTP clients are bound to the loop that first uses them, and
the engine runs each sweep in a fresh loop (`asyncio.run` per sweep, per test). Every actor group
and backend that keeps such state across sweeps holds it in a `PerLoop`, instead of comparing loops
itself.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    def __init__(self, make: Callable[[], T]) -> None:
        """`make()` runs inside the new loop (it may create tasks there)."""
        self._make = make
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: T | None = None

    def get(self) -> T:
        """The state of the running loop, made now if this loop has none yet."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._value = loop, None
            self._value = self._make()
        return self._value  # type: ignore[return-value]

    def current(self) -> T | None:
        """The state made for the last loop, if that loop still runs (for code outside a
        coroutine, such as a pool growing from a timer); else None."""
        if self._loop is None or self._loop.is_closed():
            return None
        return self._value

    def reset(self) -> None:
        """Forget the state: the next `get` makes it again, even in the same loop."""
        self._loop, self._value = None, None
