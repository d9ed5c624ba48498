"""Our verdict -> where it is stricter than the peer harnesses' on purpose, in one line.
More: kbx_ray/suites/README.md, `peer.py`.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from kbx_ray.types import ErrorKind, Stage

_SEED = re.compile(r"seed (\d+):")
# (error kind, text in the message) -> why the peer's harness does not fail it
_RULES: tuple[tuple[str, str, str], ...] = (
    (ErrorKind.DISQUALIFIED, "no Triton kernel was launched",
     "no Triton kernel ran: torch or Python computed the result (the peer compares values only)"),
    (ErrorKind.DISQUALIFIED, "computes with torch ops",
     "torch computes on the tested path (the peer compares values only)"),
    (ErrorKind.DISQUALIFIED, "patched the harness", "it patched the harness runtime"),
    (ErrorKind.DISQUALIFIED, "non-default stream", "it left a non-default stream current"),
    (ErrorKind.DISQUALIFIED, "output buffer",
     "it returns the previous call's output buffer (a cache)"),
    (ErrorKind.INPUT_MUTATED, "", "it changed an input the task does not declare mutated (the "
                                  "peer compares test_results only)"),
    (ErrorKind.OUTPUT_ALIASES_INPUT, "", "an output shares memory with an input"),
    (ErrorKind.MISMATCH, "mutated argument", "it changed a declared-mutated argument unlike the "
                                             "reference (the peer compares test_results only)"),
    (ErrorKind.NONDETERMINISTIC, "", "two runs on the same inputs disagree (the peer runs once)"),
    (ErrorKind.TIMING_INVALID, "",
     "its timing failed a cross-check (the peer does not cross-check)"),
)


def stricter_reason(stage: str, error_kind: str, error_msg: str,
                    first_seed: Callable[[int], bool] = lambda s: s == 0) -> str:
    """Why we fail a kernel the peer's check would not fail, or "" (a failure both make, or a
    pass). `first_seed(s)`: whether seed s was the first its case was checked on."""
    if not error_kind:
        return ""
    msg = error_msg or ""
    if stage == Stage.STATIC and error_kind == ErrorKind.DISQUALIFIED:
        return f"static policy: {msg.splitlines()[0][:160] if msg else 'refused'}"
    for kind, needle, why in _RULES:
        if error_kind == kind and needle in msg:
            return why
    if stage == Stage.TIMING and "after timing" in msg:
        what = "a stale or cached result" if "stale" in msg else "a wrong result"
        return f"{what} after timing (the peer does not re-check)"
    m = _SEED.search(msg)
    wrong = (ErrorKind.MISMATCH, ErrorKind.SHAPE_MISMATCH, ErrorKind.DTYPE_MISMATCH)
    if error_kind in wrong and m and not first_seed(int(m.group(1))):
        return "wrong on a later seed only (its first was right; the peer checks one seed)"
    return ""


def of_result(result: Any) -> str:
    """`stricter_reason` of an EvalResult. Its `seeds` (when recorded) list every case's seeds
    in order, `cases[i].seeds` of them per case: that tells a case's first seed."""
    seeds = list(getattr(result, "seeds", None) or [])
    starts, pos = set(), 0
    for c in result.cases:
        starts.add(pos)
        pos += max(1, int(c.seeds))

    def first_seed(s: int) -> bool:
        return seeds.index(s) in starts if s in seeds else s == 0

    return stricter_reason(result.stage, result.error_kind, result.error_msg, first_seed)
