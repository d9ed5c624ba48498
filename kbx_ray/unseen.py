"""Unseen cases: a case no task file lists, drawn for every evaluation (issue 26, shape specialisation).

Every public case is fixed, so a kernel that is right only on the public cases (one BLOCK that
covers the largest case with no loop, a grid hard-coded to the public shapes, a branch on an exact
size, a fast path for even sizes, a dtype or layout the largest case lacks, a table of a no-input
task's answers) would pass them all. The evaluator therefore adds `evaluation.unseen_cases` cases
drawn from the task's family with a secret seed (`Evaluator._unseen`), and records them.

A task declares its family once, as `SHAPES = family(...)` (re-exported by `kbx_ray.taskkit`); a task
that declares nothing gets `family()`, the default derivation (`unseen_draw.py` draws):

- the base is the largest case that runs here (on the CPU: the largest small case), by elements
  (`cost(case)["bytes"]` over its dtype's size), or the next one down where none of its draws fits;
  its other keys (flags, constants) are kept;
- its dtype and layout keys (`LAYOUT_KEYS`, or the family's `vary`) are drawn independently, each
  from the values the public cases that run here give it (a key a case lacks is a value too);
- the size-like integers of its free keys (ints, lists of ints and lists of such lists; by default
  every key but those in `NOT_SIZES` and in `hold`) are drawn independently, size by size, except
  that sizes equal in every public case that has both (matmul's K, broadcast dims) stay equal: each
  even or odd, a power of two or not, below or above the public sizes; 0 and 1 stay (size-1 and
  empty edges keep their meaning); sizes are pushed past the largest value the public cases give
  that key and axis (past the power of two at or above it where that fits: a BLOCK sized to cover
  the largest public case no longer covers the unseen one), as many as fit, at least one, and the
  case holds more elements than the largest public one where that fits;
- the whole case stays within `CPU_GROWTH` (2x, interpreter-cheap) or `GPU_GROWTH` (1.5x) of the
  largest case's memory footprint (kbx_ray/footprint.py: its input storages and outputs);
- a draw must be one the task can make: its inputs and reference run (under fake tensors, or for
  real on a CPU-sized case, `footprint.check`); where that cannot be told, or no free draw is
  valid, the draw keeps the base's dtype and layout and the order of its sizes, equal sizes equal;
- a task with no tensor inputs draws its arguments too, from the family's `values`: a table
  `{"start": (-10.0, 10.0)}` (uniform in the range) or a function `(rng, case) -> {key: value}`.

A task whose dims carry other constraints holds those keys (`hold=("hq", "hkv")`: head counts whose
ratio matters), names its free keys (`free=(...)`), gives multiples (`multiple={"d": 2}`: the drawn
value is a multiple) or bounds (`most={"d": 256}`), orders between sizes (`order=(("sq", "sk"),)`: Sq <= Sk), or its own `draw(rng, base, here, limit, size)
-> case` (`here`: the public cases that run here; `size`: a case's footprint, which must stay within
`limit`). A task for which a family makes no sense says why: `family(fixed="...")`, and
tests/integration/test_conformance.py lists those tasks.

Stdlib only: the sandbox worker imports the task files, and with them this module (`cases` imports
kbx_ray.footprint, which imports torch, when it runs: in the parent).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kbx_ray import unseen_draw
from kbx_ray.unseen_draw import multiple_at, positions  # noqa: F401 - the family's view of a case

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
    from kbx_ray import footprint

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
