"""The kernel program a candidate's call ran, as data: what the replay executes and nothing more.
More: kbx_ray/evaluate/INTEGRITY.md, `program.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERSION = 1
MAX_LAUNCHES = 20000
MAX_STEPS = 50000
MAX_CONST = 1024        # values a program may carry as small constant buffers (all together)
MAX_NBYTES = 1 << 40
DTYPES = frozenset("""float16 bfloat16 float32 float64 float8_e4m3fn float8_e5m2 int8 int16 int32
                   int64 uint8 uint16 uint32 uint64 bool complex64 complex128""".split())
STEP_OPS = frozenset({"fill", "copy", "pad", "const", "launch"})


class ProgramError(ValueError):
    """The recording is not a well-formed program of the replay's instruction set."""


@dataclass(frozen=True)
class Program:
    buffers: list[dict]
    steps: list[dict]
    outputs: list[dict]

    def to_wire(self) -> dict:
        return {"version": VERSION, "buffers": self.buffers, "steps": self.steps,
                "outputs": self.outputs}

    def launches(self) -> int:
        return sum(1 for s in self.steps if s["op"] == "launch")

    def payload(self) -> int:
        """Values the program carries outside its kernels and inputs: the scalar arguments of
        its launches, fill values and constant buffers. A host-computed answer would have to
        travel here, so it is bounded against the outputs' size (parent/replay_check.py)."""
        n = 0
        for s in self.steps:
            if s["op"] == "launch":
                n += sum(_scalars(a) for a in [*s["args"], *s["kwargs"].values()])
            elif s["op"] in ("fill", "pad"):
                n += 1
            elif s["op"] == "const":
                n += len(s["values"])
        return n


def _scalars(arg: dict) -> int:
    if "seq" in arg:
        return sum(_scalars(a) for a in arg["seq"])
    v = arg.get("v")
    return 1 if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def parse(obj: Any) -> Program:
    """A program from its wire form, or ProgramError naming what is wrong."""
    if not isinstance(obj, dict) or obj.get("version") != VERSION:
        raise ProgramError("no program of this version was recorded")
    if set(obj) != {"version", "buffers", "steps", "outputs"}:
        raise ProgramError(f"unexpected program fields {sorted(obj)}")
    buffers, steps, outputs = obj["buffers"], obj["steps"], obj["outputs"]
    if not all(isinstance(x, list) for x in (buffers, steps, outputs)):
        raise ProgramError("buffers, steps and outputs must be lists")
    if len(steps) > MAX_STEPS:
        raise ProgramError(f"{len(steps)} steps (at most {MAX_STEPS})")
    for b in buffers:
        _buffer(b)
    nbuf = len(buffers)
    const = 0
    for s in steps:
        const += _step(s, nbuf)
    if const > MAX_CONST:
        raise ProgramError(f"{const} constant values carried outside the kernels (at most "
                           f"{MAX_CONST})")
    for r in outputs:
        _ref(r, nbuf)
    prog = Program(buffers, steps, outputs)
    if prog.launches() > MAX_LAUNCHES:
        raise ProgramError(f"{prog.launches()} launches (at most {MAX_LAUNCHES})")
    return prog


def _int(v: Any, what: str, lo: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ProgramError(f"{what} must be an integer >= {lo}, got {v!r}")
    return v


def _buffer(b: Any) -> None:
    if not isinstance(b, dict) or b.get("kind") not in ("input", "alloc"):
        raise ProgramError(f"bad buffer {b!r}")
    if set(b) != ({"kind", "index", "nbytes"} if b["kind"] == "input" else {"kind", "nbytes"}):
        raise ProgramError(f"bad buffer fields {sorted(b)}")
    if _int(b["nbytes"], "a buffer's size") > MAX_NBYTES:
        raise ProgramError("a buffer over 1 TiB")
    if b["kind"] == "input":
        _int(b["index"], "an input index")


def _ref(r: Any, nbuf: int) -> None:
    if not isinstance(r, dict) or set(r) != {"buf", "offset", "shape", "stride", "dtype"}:
        raise ProgramError(f"bad tensor reference {r!r}")
    if _int(r["buf"], "a buffer id") >= nbuf:
        raise ProgramError(f"buffer {r['buf']} does not exist")
    _int(r["offset"], "an offset")
    if r["dtype"] not in DTYPES:
        raise ProgramError(f"dtype {r['dtype']!r} is not replayable")
    if not isinstance(r["shape"], list) or not isinstance(r["stride"], list) or \
            len(r["shape"]) != len(r["stride"]) or len(r["shape"]) > 8:
        raise ProgramError("a reference's shape and stride must be lists of one length (<= 8)")
    for n in r["shape"]:
        _int(n, "a size")
    for s in r["stride"]:
        _int(s, "a stride")


def _value(v: Any) -> None:
    if v is None or isinstance(v, (bool, int, str)):
        if isinstance(v, str) and len(v) > 64:
            raise ProgramError("a string argument over 64 characters")
        return
    if isinstance(v, float):
        return
    raise ProgramError(f"a value of type {type(v).__name__} is not replayable")


def _arg(a: Any, nbuf: int, depth: int = 0) -> None:
    if not isinstance(a, dict) or len(a) != 1 or depth > 4:
        raise ProgramError(f"bad launch argument {a!r}")
    (k, v), = a.items()
    if k == "t":
        _ref(v, nbuf)
    elif k == "v":
        _value(v)
    elif k in ("tl", "torch"):
        if not isinstance(v, str) or len(v) > 32:
            raise ProgramError(f"bad dtype argument {v!r}")
    elif k == "seq" and isinstance(v, list) and len(v) <= 64:
        for x in v:
            _arg(x, nbuf, depth + 1)
    else:
        raise ProgramError(f"bad launch argument {a!r}")


def _step(s: Any, nbuf: int) -> int:
    """Check one step; the constant values it carries."""
    if not isinstance(s, dict) or s.get("op") not in STEP_OPS:
        raise ProgramError(f"a step outside the replay's instruction set: {str(s)[:80]}")
    op = s["op"]
    fields = {"fill": {"dst", "value"}, "copy": {"dst", "src"}, "pad": {"dst", "src", "pad", "value"},
              "const": {"dst", "values"}, "launch": {"kernel", "grid", "args", "kwargs"}}[op]
    if set(s) != fields | {"op"}:
        raise ProgramError(f"bad {op} step fields {sorted(s)}")
    if op == "launch":
        if not isinstance(s["kernel"], str) or not s["kernel"].isidentifier():
            raise ProgramError(f"bad kernel name {s['kernel']!r}")
        grid = s["grid"]
        if not isinstance(grid, list) or not 1 <= len(grid) <= 3:
            raise ProgramError(f"bad grid {grid!r}")
        for g in grid:
            _int(g, "a grid size")
        if not isinstance(s["args"], list) or not isinstance(s["kwargs"], dict):
            raise ProgramError("a launch's args must be a list and its kwargs a dict")
        for a in s["args"]:
            _arg(a, nbuf)
        for k, a in s["kwargs"].items():
            if not isinstance(k, str) or not k.isidentifier():
                raise ProgramError(f"bad keyword {k!r}")
            _arg(a, nbuf)
        return 0
    _ref(s["dst"], nbuf)
    if op in ("copy", "pad"):
        _ref(s["src"], nbuf)
    if op in ("fill", "pad"):
        _value(s["value"])
        if isinstance(s["value"], str):
            raise ProgramError("a fill value must be a number")
    if op == "pad":
        if not isinstance(s["pad"], list) or len(s["pad"]) > 16:
            raise ProgramError("bad pad widths")
        for p in s["pad"]:
            if not isinstance(p, int) or isinstance(p, bool):
                raise ProgramError("bad pad widths")
    if op == "const":
        vals = s["values"]
        if not isinstance(vals, list) or not all(isinstance(v, (int, float)) for v in vals):
            raise ProgramError("a constant buffer's values must be numbers")
        return len(vals)
    return 0
