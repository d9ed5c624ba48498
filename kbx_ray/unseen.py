"""Unseen cases: a case no task file lists, drawn for every evaluation (issue 26, shape specialisation).

Every public case is fixed, so a kernel that is right only up to the public sizes (one BLOCK that
covers the largest case with no loop, a grid hard-coded to the public shapes, a branch on an exact
size) would pass them all. The evaluator therefore adds `evaluation.unseen_cases` cases drawn from
the task's shape family with a secret seed (`Evaluator._unseen`), and records them.

A task declares its family once, as `SHAPES = family(...)` (re-exported by `kbx_ray.taskkit`); a task
that declares nothing gets `family()`, the default derivation:

- the base is the largest case that runs here (on the CPU: the largest small case), by elements
  (`cost(case)["bytes"]` over its dtype's size), or the next one down where no size of that one
  can pass the public maximum within the bound;
- the size-like integers of its free keys (ints, lists of ints and lists of such lists; by default
  every key but those in `NOT_SIZES` and in `hold`) are mapped value by value, consistently (equal
  dims stay equal: matmul K, broadcast dims) and monotonically (order relations such as k <= n
  hold), each value v >= 2 to a new odd value above v; 0 and 1 stay (size-1 and empty edges keep
  their meaning);
- at least one value is pushed past the largest value the public cases that run here give that
  key and axis, where it fits past the power of two at or above it (a BLOCK sized to cover the
  largest public case no longer covers the unseen one), while the whole case stays within
  `CPU_GROWTH` (2x, interpreter-cheap) or `GPU_GROWTH` (1.5x) of the largest case's memory
  footprint (kbx_ray/footprint.py: its input storages and outputs; not `cost()`'s traffic, which
  skips unread tables and spare blocks: the bound is on memory); where growing every size does not
  fit, one size is pushed alone and the others made odd while they fit.

A task whose dims carry other constraints holds those keys (`hold=("hq", "hkv")`: head counts whose
ratio matters), names its free keys (`free=(...)`), gives multiples (`multiple={"d": 2}`: the drawn
value is a multiple; odd sizes then come from the other keys) or its own `draw(rng, base, here,
limit, size) -> case` (`here`: the public cases that run here; `size`: a case's footprint, which
must stay within `limit`). A task for which a family makes no sense says why: `family(fixed="...")`, and tests/integration/test_conformance.py lists those tasks.

Stdlib only: the sandbox worker imports the task files, and with them this module (`cases` imports
kbx_ray.footprint, which imports torch, when it runs: in the parent).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CPU_GROWTH = 2.0   # an unseen small case holds at most this many times the largest one's footprint
GPU_GROWTH = 1.5   # ... and a large one (bounded in memory: 3 seeds of it are checked)
ATTEMPTS = 24      # draws tried before the minimal fallback (every size to the next odd value)

# Integer case keys that are never sizes, whatever the task: axes, offsets, strides and constants.
NOT_SIZES = frozenset({
    "name", "small", "unseen", "dtype", "dim", "dims", "axes", "axis", "stride", "stride_y",
    "padding", "offset", "diagonal", "dilation", "groups", "group", "ignore_index", "shift",
    "exponent", "correction", "qmin", "qmax", "start", "end", "seed", "call", "numel",
})


@dataclass(frozen=True)
class Family:
    """A task's shape family (see the module docstring)."""

    free: tuple[str, ...] | None = None   # the keys whose integers are sizes (None: all but NOT_SIZES)
    hold: tuple[str, ...] = ()             # keys kept as in the base case
    multiple: dict[str, int | str] = field(default_factory=dict)  # key (or "key.axis", axis -1
    #                                        for the last) -> its drawn values' divisor, an int or
    #                                        the name of the case key holding it
    most: dict[str, int] = field(default_factory=dict)  # key (or "key.axis") -> the contract's
    #                                        largest size there (one that would pass it stays)
    fixed: str = ""                        # non-empty: no unseen case, and why
    draw: Callable[..., dict] | None = None  # the task's own draw (rng, base, here, limit, size)

    def keys(self, case: dict) -> list[str]:
        """The case's free keys that hold sizes, in the case's order."""
        names = self.free if self.free is not None else [k for k in case if k not in NOT_SIZES]
        return [k for k in case if k in names and k not in self.hold and _sizes(case[k])]


def family(*, free: tuple[str, ...] | list[str] | None = None, hold: tuple[str, ...] | list[str] = (),
           multiple: dict[str, int | str] | None = None, most: dict[str, int] | None = None,
           fixed: str = "", draw: Callable[..., dict] | None = None) -> Family:
    """The declaration a task file makes as `SHAPES = family(...)`."""
    return Family(tuple(free) if free is not None else None, tuple(hold), dict(multiple or {}),
                  dict(most or {}), fixed, draw)


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


def _positions(value: Any, path: tuple) -> Iterator[tuple[tuple, int]]:
    """(position, size) for every integer of a free key: the position names the key, the length of
    each list on the way and the index in it, so that only like axes are compared."""
    if isinstance(value, int):
        yield path, value
        return
    for i, v in enumerate(value):
        yield from _positions(v, (*path, len(value), i))


def _remap(value: Any, mapping: dict[int, int]) -> Any:
    if isinstance(value, int):
        return mapping.get(value, value)
    return [_remap(v, mapping) for v in value]


def positions(case: dict, fam: Family) -> dict[tuple, int]:
    return {p: v for k in fam.keys(case) for p, v in _positions(case[k], (k,))}


def _odd_above(v: int, step: int = 1) -> int:
    """The least odd value > v (a multiple of `step`, odd when `step` is)."""
    n = v + 1
    while n % 2 == 0 or n % step:
        n += 1
    return n


def cases(module: Any, public: list[dict] | tuple[dict, ...], count: int, rng: random.Random,
          small: bool) -> list[dict]:
    """`count` unseen cases for the task `module`, drawn with `rng` from the public cases that run
    here (`small`: the interpreter's), each named `unseen_<i>`, its `unseen` key naming the public
    case it was drawn from. Empty when the task has no family, or none of those cases has a size
    that can grow within the bound (a task cut down to its size-1 case)."""
    fam = family_of(module)
    if fam.fixed or count <= 0:
        return []
    from kbx_ray import footprint

    here = [c for c in public if c["small"] or not small]
    size = lambda c: int(module.cost(c)["bytes"])  # noqa: E731
    memory = lambda c: footprint.size(module, c)  # noqa: E731
    limit_ratio = CPU_GROWTH if small else GPU_GROWTH
    out = []
    for i in range(count):
        case = draw_one(fam, here, rng, size, limit_ratio, memory)
        if case is None:
            return []
        out.append({**case, "name": f"unseen_{i}", "small": small, "unseen": case["name"]})
    return out


def draw_one(fam: Family, here: list[dict], rng: random.Random, size: Callable[[dict], int],
             limit_ratio: float, memory: Callable[[dict], int] | None = None) -> dict | None:
    """One case (module docstring): from the case with the most elements (`size`: cost bytes), or
    the next one down where no size of that one can pass the public maximum within the bound,
    `limit_ratio` x the largest `memory` (the footprint; default `size`) of `here`."""
    memory = memory or size
    order = sorted(here, key=lambda c: -size(c) / _itemsize(c))  # the most elements first (stable)
    limit = limit_ratio * max(map(memory, here))
    if fam.draw is not None:
        return fam.draw(rng, dict(order[0]), here, limit, memory)
    top: dict[tuple, int] = {}
    for c in here:
        for p, v in positions(c, fam).items():
            top[p] = max(top.get(p, v), v)
    for base in order:
        case = _draw_from(fam, base, rng, memory, limit, top)
        if case is not None:
            return case
    return None  # nothing can grow (only size-1 cases): tests/integration/test_conformance.py
    #              makes sure that every task of the suite draws one


def _draw_from(fam: Family, base: dict, rng: random.Random, size: Callable[[dict], int],
               limit: float, top: dict[tuple, int]) -> dict | None:
    keys = fam.keys(base)
    where = positions(base, fam)
    step: dict[int, int] = {}
    for p, v in where.items():  # a value shared by keys with multiples takes all of them
        step[v] = math.lcm(step.get(v, 1), multiple_at(fam, base, p))
    values = sorted({v for v in where.values() if v >= 2})
    pushable = [p for p, v in where.items() if v >= 2]
    if not pushable:
        return None

    def fits(mapping: dict[int, int]) -> dict | None:
        case = _apply(fam, base, keys, mapping)
        past = any(v > top[p] for p, v in positions(case, fam).items())
        return case if past and size(case) <= limit else None

    for attempt in range(ATTEMPTS):
        growth = 0.3 * (1 - attempt / ATTEMPTS)
        push = rng.choice(pushable)
        # first past the power of two at or above the public maximum (a BLOCK sized to cover it),
        # then past the maximum itself
        past = _pow2(top[push]) if attempt < ATTEMPTS // 2 else top[push]
        case = fits(_mapping(values, step, rng, growth, {where[push]: past}))
        if case is not None:
            return case
    # Too large with every size grown: push one size alone, then make the others odd (their next
    # odd value) one at a time while the case still fits.
    for push in rng.sample(pushable, len(pushable)):
        v = where[push]
        mapping = {v: _mapping([v], step, rng, 0.0, {v: top[push]})[v]}
        if fits(mapping) is None:
            continue
        for w in rng.sample(values, len(values)):
            if w in mapping:
                continue
            new = _mapping([w], step, rng, 0.0, {})[w]
            if any((w < u) != (new < n) for u, n in mapping.items()):
                continue  # it would change the order of two sizes
            if fits({**mapping, w: new}) is not None:
                mapping[w] = new
        return fits(mapping)
    return None


def multiple_at(fam: Family, case: dict, position: tuple) -> int:
    """The divisor the family asks of the size at `position` (1: none)."""
    m = _keyed(fam.multiple, position) or 1
    return int(case[m]) if isinstance(m, str) else int(m)


def _apply(fam: Family, base: dict, keys: list[str], mapping: dict[int, int]) -> dict:
    """`base` with its free keys remapped; a size that would pass its `most` stays."""
    return {**base, **{k: _remap_at(base[k], mapping, fam, (k,)) for k in keys}}


def _remap_at(value: Any, mapping: dict[int, int], fam: Family, path: tuple) -> Any:
    if isinstance(value, int):
        new = mapping.get(value, value)
        most = _keyed(fam.most, path)
        return value if most is not None and new > most else new
    return [_remap_at(v, mapping, fam, (*path, len(value), i)) for i, v in enumerate(value)]


def _keyed(table: dict, position: tuple) -> Any:
    """The entry of `table` for a size's position: "key.axis" (axis -1: the last) for a flat
    list, else "key"; None when there is none."""
    key, axes = position[0], position[1:]
    hit = table.get(key)
    if len(axes) == 2:  # a flat list: (length, index)
        for name in (f"{key}.{axes[1]}", f"{key}.{axes[1] - axes[0]}"):
            hit = table.get(name, hit)
    return hit


def _mapping(values: list[int], step: dict[int, int], rng: random.Random, growth: float,
             past: dict[int, int]) -> dict[int, int]:
    """Each value to an odd value above it (a multiple of its key's `multiple`), strictly
    increasing with it; a value in `past` also goes above what it maps to there."""
    mapping: dict[int, int] = {}
    last = 1
    for v in values:
        m = step[v]
        floor = max(v, last, past.get(v, 0))
        hi = int(floor * (1 + growth * rng.random()))
        new = _odd_above(floor, m) if m % 2 else _multiple_above(floor, m)
        if hi > new:
            new = rng.randint(new, hi)
            new = _odd_above(new - 1, m) if m % 2 else _multiple_above(new - 1, m)
        mapping[v] = last = new
    return mapping


def _pow2(v: int) -> int:
    return 1 << max(0, v - 1).bit_length()


_ITEMSIZE = {"float64": 8, "int64": 8, "complex64": 8, "float32": 4, "int32": 4, "float16": 2,
             "bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def _itemsize(case: dict) -> int:
    return _ITEMSIZE.get(str(case.get("dtype", "float32")), 4)


def _multiple_above(v: int, m: int) -> int:
    """The least multiple of an even `m` above v (an even size: the task needs it so)."""
    return (v // m + 1) * m
