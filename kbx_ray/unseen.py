"""Unseen cases: a case no task file lists, drawn for every evaluation.
More: kbx_ray/README.md, `unseen.py`.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kbx_ray.cases import unseen_draw
from kbx_ray.cases.unseen_draw import multiple_at, positions  # noqa: F401 - a family's view of a case

CPU_GROWTH = 2.0   # an unseen small case holds at most this many times the largest one's footprint
GPU_GROWTH = 1.5   # ... and a large one (bounded in memory: 3 seeds of it are checked)

# Integer case keys that are never sizes, whatever the task: axes, offsets, strides and constants.
NOT_SIZES = frozenset({
    "name", "small", "unseen", "dtype", "dim", "dims", "axes", "axis", "stride", "stride_y",
    "padding", "offset", "diagonal", "dilation", "groups", "group", "ignore_index", "shift",
    "exponent", "correction", "qmin", "qmax", "start", "end", "seed", "call", "numel",
})
# Case keys that name a dtype or a layout (taskkit's `view`/`views`: "t" transposed, "s" strided):
# each is drawn from the values the public cases give it.
LAYOUT_KEYS = frozenset({
    "dtype", "view", "views", "transposed", "sliced", "strided", "channels_last", "b_transposed",
    "w_transposed", "column_major", "layout", "bshd", "bhsd", "z_sliced", "gate_t", "permuted", "soa",
})


@dataclass(frozen=True)
class Family:
    """A task's family (see the module docstring)."""

    free: tuple[str, ...] | None = None   # the keys whose integers are sizes (None: all but NOT_SIZES)
    hold: tuple[str, ...] = ()             # keys kept as in the base case
    multiple: dict[str, int | str] = field(default_factory=dict)  # key (or "key.axis", axis -1
    #                                        for the last) -> its drawn values' divisor, an int or
    #                                        the name of the case key holding it
    most: dict[str, int] = field(default_factory=dict)  # key (or "key.axis") -> the contract's
    #                                        largest size there
    fixed: str = ""                        # non-empty: no unseen case, and why
    draw: Callable[..., dict] | None = None  # the task's own draw (rng, base, here, limit, size)
    vary: tuple[str, ...] | None = None    # the keys drawn from the public values (None: LAYOUT_KEYS)
    values: Any = None                     # a no-input task's arguments: {key: (lo, hi)} or
    #                                        a function (rng, case) -> {key: value}
    order: tuple[tuple[str, str], ...] = ()  # (a, b): a drawn case keeps case[a] <= case[b]

    def holds(self, case: dict) -> bool:
        """The contract's orders between sizes (`order`) hold in `case`."""
        return all(case[a] <= case[b] for a, b in self.order if a in case and b in case)

    def keys(self, case: dict) -> list[str]:
        """The case's free keys that hold sizes, in the case's order."""
        names = self.free if self.free is not None else [k for k in case if k not in NOT_SIZES]
        return [k for k in case if k in names and k not in self.hold and _sizes(case[k])]


def family(*, free: tuple[str, ...] | list[str] | None = None, hold: tuple[str, ...] | list[str] = (),
           multiple: dict[str, int | str] | None = None, most: dict[str, int] | None = None,
           fixed: str = "", draw: Callable[..., dict] | None = None,
           vary: tuple[str, ...] | list[str] | None = None, values: Any = None,
           order: tuple[tuple[str, str], ...] = ()) -> Family:
    """The declaration a task file makes as `SHAPES = family(...)`."""
    return Family(tuple(free) if free is not None else None, tuple(hold), dict(multiple or {}),
                  dict(most or {}), fixed, draw, tuple(vary) if vary is not None else None, values,
                  tuple(tuple(p) for p in order))


DEFAULT = Family()


def family_of(module: Any) -> Family:
    """The task module's family: its `SHAPES`, else the default. An adapted external problem (a
    shim: it names its `ENTRY`) has its inputs fixed by its own code: no family."""
    fam = getattr(module, "SHAPES", None)
    if isinstance(fam, Family):
        return fam
    if hasattr(module, "ENTRY"):
        return Family(fixed="an external problem: its own code fixes its inputs")
    return DEFAULT


def _sizes(value: Any) -> bool:
    """An int (not a bool), or a non-empty list of them or of such lists."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(_sizes(v) for v in value)


def cases(module: Any, public: list[dict] | tuple[dict, ...], count: int, rng: random.Random,
          small: bool) -> list[dict]:
    """`count` unseen cases for the task `module`, drawn with `rng` from the public cases that run
    here (`small`: the interpreter's), each named `unseen_<i>`, its `unseen` key naming the public
    case it was drawn from. Empty when the task has no family, or none of those cases has a size
    that can grow within the bound (a task cut down to its size-1 case)."""
    fam = family_of(module)
    if fam.fixed or count <= 0:
        return []
    from kbx_ray.cases import footprint

    here = [c for c in public if c["small"] or not small]
    size = lambda c: int(module.cost(c)["bytes"])  # noqa: E731
    memory = lambda c: footprint.size(module, c)  # noqa: E731
    check = lambda c: footprint.check(module, c, real=small)  # noqa: E731
    limit_ratio = CPU_GROWTH if small else GPU_GROWTH
    out = []
    for i in range(count):
        case = draw_one(fam, here, rng, size, limit_ratio, memory, list(public), check)
        if case is None:
            return []
        out.append({**case, "name": f"unseen_{i}", "small": small, "unseen": case["name"]})
    return out


def draw_one(fam: Family, here: list[dict], rng: random.Random, size: Callable[[dict], int],
             limit_ratio: float, memory: Callable[[dict], int] | None = None,
             public: list[dict] | None = None,
             check: Callable[[dict], str] | None = None) -> dict | None:
    """One case (module docstring): from the case with the most elements (`size`: cost bytes), or
    the next one down where none of its draws fits `limit_ratio` x the largest `memory` (the
    footprint; default `size`) of `here`; `check(case)` says whether the task can make it ("ok",
    "invalid" or "unknown"; default "ok"), `public` gives the evidence for equal sizes (default
    `here`)."""
    memory = memory or size
    order = sorted(here, key=lambda c: -unseen_draw.elements(c, size))  # the most first (stable)
    limit = limit_ratio * max(map(memory, here))
    if fam.draw is not None:
        return fam.draw(rng, dict(order[0]), here, limit, memory)
    for base in order:
        case = unseen_draw.draw_from(fam, base, here, public or here, rng, size, memory, limit,
                                     check or (lambda c: "ok"), LAYOUT_KEYS)
        if case is not None:
            return case
    return None  # nothing can grow (only size-1 cases): tests/integration/test_conformance.py
    #              makes sure that every task of the suite draws one
