"""A launch's grid callable -> the same callable, keeping what it returned (the recorded grid).

Deliberately not a harness file (`frames.HARNESS_FILES`): a grid Triton calls through this wrapper
runs as it would without it, so a builtin or `functools.partial` standing in for a grid is still
the candidate's code to the monitor, never an exempt harness frame. Standard library only.
"""
from __future__ import annotations

from typing import Any, Callable


def capture(grid: Callable[[Any], Any], seen: list[Any]) -> Callable[[Any], Any]:
    def resolved(meta: Any) -> Any:
        out = grid(meta)
        seen.append(out)
        return out

    return resolved
