"""One unseen case drawn from a base case (kbx_ray/unseen.py says what a draw keeps and why).
More: kbx_ray/cases/README.md, `unseen_draw.py`.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ATTEMPTS = 48      # draws tried per mode (most are screened by cost alone, without a footprint)
SLACK = 1.25       # the cost-based screen lets through draws up to this much over the limit
ABSENT = "<absent>"  # a variant key that a case does not set


@dataclass(frozen=True)
class SizeClass:
    """Positions that take one value: the base's `v`, the public maximum `top` over them, the
    divisor `step` their keys ask for and the contract's bound `most` (0: none)."""

    where: tuple[tuple, ...]
    v: int
    top: int
    step: int
    most: int


def _positions(value: Any, path: tuple) -> Iterator[tuple[tuple, int]]:
    """(position, size) for every integer of a free key: the position names the key, the length of
    each list on the way and the index in it, so that only like axes are compared."""
    if isinstance(value, int):
        yield path, value
        return
    for i, v in enumerate(value):
        yield from _positions(v, (*path, len(value), i))


def positions(case: dict, fam: Any) -> dict[tuple, int]:
    return {p: v for k in fam.keys(case) for p, v in _positions(case[k], (k,))}


def _keyed(table: dict, position: tuple) -> Any:
    """The entry of `table` for a size's position: "key.axis" (axis -1: the last) for a flat
    list, else "key"; None when there is none."""
    key, axes = position[0], position[1:]
    hit = table.get(key)
    if len(axes) == 2:  # a flat list: (length, index)
        for name in (f"{key}.{axes[1]}", f"{key}.{axes[1] - axes[0]}"):
            hit = table.get(name, hit)
    return hit


def multiple_at(fam: Any, case: dict, position: tuple) -> int:
    """The divisor the family asks of the size at `position` (1: none)."""
    m = _keyed(fam.multiple, position) or 1
    return int(case[m]) if isinstance(m, str) else int(m)


def tops(here: list[dict], fam: Any) -> dict[tuple, int]:
    """The largest value the public cases give each position."""
    top: dict[tuple, int] = {}
    for c in here:
        for p, v in positions(c, fam).items():
            top[p] = max(top.get(p, v), v)
    return top


def classes(fam: Any, base: dict, public: list[dict], top: dict[tuple, int],
            tied: bool) -> list[SizeClass]:
    """The base's size positions grouped into classes that share a value: equal in the base and
    in every public case that has both positions (`tied`: equal in the base)."""
    where = positions(base, fam)
    seen = [positions(c, fam) for c in public]
    groups: list[list[tuple]] = []
    for p in where:
        for g in groups:
            q = g[0]
            if where[q] == where[p] and (tied or all(s[p] == s[q] for s in seen if p in s and q in s)):
                g.append(p)
                break
        else:
            groups.append([p])
    out = []
    for g in groups:
        step = math.lcm(*[multiple_at(fam, base, p) for p in g])
        bounds = [b for b in (_keyed(fam.most, p) for p in g) if b is not None]
        out.append(SizeClass(tuple(g), where[g[0]], max(top.get(p, where[p]) for p in g), step,
                             min(bounds) if bounds else 0))
    return out


def variants(fam: Any, here: list[dict], keys: frozenset[str]) -> dict[str, list]:
    """The dtype and layout keys that the public cases here set differently -> their values."""
    names = fam.vary if fam.vary is not None else keys
    out: dict[str, list] = {}
    for k in names:
        vals: list = []
        for c in here:
            v = c.get(k, ABSENT)
            if v not in vals:
                vals.append(v)
        if len(vals) > 1:
            out[k] = vals
    return out


def pow2(v: int) -> int:
    return 1 << max(0, v - 1).bit_length()


def _size(rng: random.Random, lo: int, hi: int, step: int, most: int) -> int | None:
    """A multiple of `step` in about [lo, hi] (never above `most`), of a kind drawn at random: odd,
    even but no power of two, a power of two, or any."""
    kind = rng.choice(("odd", "even", "pow2", "any"))
    if kind == "pow2":
        p = pow2(lo)
        if p <= hi and p % step == 0:
            return p if not most or p <= most else None
        kind = "any"
    u = rng.randint(lo, max(lo, hi))
    if kind == "even":
        s2 = math.lcm(step, 2)
        n = -(-u // s2) * s2
        n += s2 if n & (n - 1) == 0 else 0
    else:
        n = -(-u // step) * step
        if kind == "odd" and step % 2 and n % 2 == 0:
            n += step
    if most and n > most:
        n = most // step * step
    return n if n >= lo or (most and n >= 2) else None


def pushable(cls: list[SizeClass]) -> list[int]:
    """The classes that can pass their public maximum (a size >= 2 below its bound)."""
    return [i for i, c in enumerate(cls) if c.v >= 2 and (not c.most or c.top < c.most)]


def push_set(rng: random.Random, cls: list[SizeClass], share: float) -> set[int]:
    """Each pushable class with probability `share`, at least one."""
    can = pushable(cls)
    return {i for i in can if rng.random() < share} or ({rng.choice(can)} if can else set())


def draw_sizes(rng: random.Random, cls: list[SizeClass], pushed: set[int], growth: float,
               ordered: bool, block: bool, shrink: float = 0.5) -> dict[tuple, int]:
    """Position -> value: the classes in `pushed` past their public maximum (with `block`, past
    the power of two at or above it), the others anywhere from
    `shrink` x their base value (at least 2: room for a pushed size) to `growth` past the larger
    of it and their maximum; `ordered` keeps the
    base's order of values (and equal values equal). Where two classes or more are drawn, one is
    even and one odd (an even fast path and an odd one cannot both escape)."""
    value: dict[int, int] = {}
    last, last_v = 1, 0
    for i in sorted(range(len(cls)), key=lambda j: cls[j].v) if ordered else range(len(cls)):
        c = cls[i]
        value[i] = c.v
        if c.v >= 2:
            if i in pushed:
                lo = (pow2(c.top) if block else c.top) + 1
                hi = lo + int(lo * growth)
            else:
                lo, hi = max(2, int(c.v * shrink)), int(max(c.v, c.top) * (1 + growth))
            if ordered:
                lo = max(lo, last + (c.v > last_v))
            value[i] = _size(rng, lo, max(hi, lo), c.step, c.most) or c.v
        if ordered:
            last, last_v = max(last, value[i]), c.v
    _mix_parity(rng, cls, value)
    return {p: value[i] for i, c in enumerate(cls) for p in c.where}


def _mix_parity(rng: random.Random, cls: list[SizeClass], value: dict[int, int]) -> None:
    """Where the drawn classes (base value >= 2) all have one parity, move one whose multiple is
    odd by its multiple (up, or down where its bound says so)."""
    drawn = [i for i, c in enumerate(cls) if c.v >= 2]
    if len(drawn) < 2 or len({value[i] % 2 for i in drawn}) > 1:
        return
    odd_steps = [i for i in drawn if cls[i].step % 2]
    if not odd_steps:
        return
    i = rng.choice(odd_steps)
    c = cls[i]
    up = value[i] + c.step
    value[i] = up if not c.most or up <= c.most else max(2, value[i] - c.step)


def apply_sizes(fam: Any, base: dict, values: dict[tuple, int]) -> dict:
    """`base` with each free key's integers replaced by their position's value."""
    def put(value: Any, path: tuple) -> Any:
        if isinstance(value, int):
            return values.get(path, value)
        return [put(v, (*path, len(value), i)) for i, v in enumerate(value)]
    return {**base, **{k: put(base[k], (k,)) for k in fam.keys(base)}}


def draw_variants(rng: random.Random, table: dict[str, list], base: dict, keep: float) -> dict:
    """`base` with each variant key drawn from its values (kept as the base's with probability
    `keep`); a drawn ABSENT removes the key."""
    out = dict(base)
    for k, vals in table.items():
        v = base.get(k, ABSENT) if rng.random() < keep else rng.choice(vals)
        if v == ABSENT:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def draw_values(rng: random.Random, values: Any, case: dict) -> dict:
    """`case` with the family's `values` drawn: a function (rng, case) -> {key: value}, or a table
    key -> (lo, hi), uniform (ints if both bounds are ints)."""
    if not values:
        return case
    if callable(values):
        return {**case, **values(rng, dict(case))}
    out = dict(case)
    for k, (lo, hi) in values.items():
        out[k] = rng.randint(lo, hi) if isinstance(lo, int) and isinstance(hi, int) else \
            rng.uniform(float(lo), float(hi))
    return out


_ITEMSIZE = {"float64": 8, "int64": 8, "complex64": 8, "float32": 4, "int32": 4, "float16": 2,
             "bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def elements(case: dict, size: Callable[[dict], int]) -> float:
    """The case's cost bytes over its dtype's size: its elements, near enough to rank cases."""
    return size(case) / _ITEMSIZE.get(str(case.get("dtype", "float32")), 4)


def _cost(size: Callable[[dict], int], case: dict) -> int | None:
    """The case's cost bytes, None where the task's `cost` refuses the case (shapes that do not
    broadcast: the draw broke a tie the public cases did not show)."""
    try:
        return size(case)
    except (ArithmeticError, LookupError, RuntimeError, TypeError, ValueError):  # not its case
        return None


def draw_from(fam: Any, base: dict, here: list[dict], public: list[dict], rng: random.Random,
              size: Callable[[dict], int], memory: Callable[[dict], int], limit: float,
              check: Callable[[dict], str], layout_keys: frozenset[str]) -> dict | None:
    """One case drawn from `base` within `limit` bytes of footprint (`memory`), or None. Free draws
    first (sizes by structural class, dtype and layout drawn), then ordered ones (the base's order
    of sizes kept), then tied ones (the base's dtype and layout, equal sizes equal: accepted where
    `check` cannot tell, "unknown"). Each mode tries every size pushed past its public maximum,
    then a secret subset (each size with probability 1/2) while the others shrink to make room,
    then ever fewer sizes growing less; the case must hold more elements than the largest public
    one for the first 3/4 of the attempts."""
    top = tops(here, fam)
    if not any(v >= 2 for v in positions(base, fam).values()):
        return None
    base_cost, base_mem = max(size(base), 1), memory(base)
    most = max(elements(c, size) for c in here)
    table = variants(fam, here, layout_keys)
    for mode in ("free", "ordered", "tied"):
        cls = classes(fam, base, public, top, tied=mode == "tied")
        aim = push_set(rng, cls, 0.5)  # the sizes this mode tries to push first, drawn secretly
        for attempt in range(ATTEMPTS):
            late = attempt / ATTEMPTS
            case = base if mode == "tied" else draw_variants(rng, table, base, late)
            pushed = set(pushable(cls)) if attempt < 2 else aim if late < 0.5 else \
                push_set(rng, cls, 1 - late)
            sizes = draw_sizes(rng, cls, pushed, 0.5 * (1 - late), mode != "free", late < 0.5,
                               0.5 if attempt % 2 else 0.0)
            case = apply_sizes(fam, case, sizes)
            case = draw_values(rng, fam.values, case)
            if not fam.holds(case):
                continue
            if not any(v > top[p] for p, v in positions(case, fam).items() if p in top):
                continue
            cost = _cost(size, case)
            if cost is None or (late < 0.75 and elements(case, lambda c: cost) <= most):
                continue
            if base_mem * cost / base_cost > SLACK * limit:
                continue  # screened by cost alone: no footprint needed
            verdict = check(case)
            if verdict == "invalid" or (verdict == "unknown" and mode != "tied"):
                continue
            if memory(case) <= limit:
                return case
    return None
