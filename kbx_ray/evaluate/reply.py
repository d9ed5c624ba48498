"""The worker's replies to `run`, `recheck` and `time` -> typed records, parsed strictly.

The worker builds these records and sends `dataclasses.asdict` of them; the parent parses the JSON
back with `parse`, which refuses a missing field, an unknown field and a value of the wrong type
(`ReplyError`, naming the field). A renamed key can then never read as an absent observation whose
check passes: the parent files a verdict that cannot be given (`infra_error`), never a pass.
More: kbx_ray/evaluate/INTEGRITY.md, `reply.py`.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
ENVELOPE = ("ok", "blobs")  # keys `main.py` and `protocol.send` add around every reply


class ReplyError(ValueError):
    """The worker's reply is not the record the parent expects (a field missing, unknown or of the
    wrong type): no verdict can be given from it."""


@dataclass(frozen=True)
class OutputMeta:
    """One output tensor on the wire (`protocol.tensor_to_wire`); its bytes are a blob."""
    dtype: str                    # torch dtype name without "torch."
    shape: tuple[int, ...]        # the tensor's shape
    stride: tuple[int, ...]       # the strides the candidate returned (the bytes are row-major)
    offset: int                   # its storage offset


@dataclass(frozen=True)
class CallReport:
    """What the worker observed of one checked call (`call_checks.observe`), and its outputs."""
    launches: int                 # Triton launches the call made
    launch_free: bool             # every output empty or an exact copy of an input (owes no launch)
    torch_ops: tuple[str, ...]    # aten ops outside the allowlist the monitor saw
    aliased: bool                 # an output shares memory with an input
    mutated: tuple[int, ...]      # inputs changed that the task does not declare mutated
    structure: str                # "none", "tensor" or "tuple<n>"
    side_stream_launches: int     # launches on a non-default CUDA stream
    stream_changed: bool          # the call left a non-default stream current
    tampered: tuple[str, ...]     # harness names the candidate replaced
    outputs: tuple[OutputMeta, ...] = ()    # the returned tensors, then declared-mutated inputs
    outputs2: tuple[OutputMeta, ...] | None = None  # the repeated run's, sent when it differs
    nondeterministic: bool = False  # the repeated run differs in structure
    program: dict[str, Any] = dataclasses.field(default_factory=dict)  # the kernel program the
    #                               call ran (program.py), or {"unsupported": why}: what is replayed


@dataclass(frozen=True)
class RunReply:
    results: tuple[CallReport, ...]   # one per seed asked for
    prof: dict[str, float]            # the worker's seconds per step (profiling only)


@dataclass(frozen=True)
class RecheckReply:
    check: CallReport                 # the checked call on fresh values in the timed buffers
    samples: tuple[TimedSample, ...]  # the timed calls' last output on each input set, encoded
    #                                   before the checked call (their blobs come first)
    prof: dict[str, float]


@dataclass(frozen=True)
class TimedSample:
    seed: int                         # the input set's seed
    outputs: tuple[OutputMeta, ...]   # the last output the timed calls returned on that set


@dataclass(frozen=True)
class TimedCheck:
    """What the timed calls did (`rotation.Rotation`): the parent judges it after timing."""
    calls: int                        # timed calls made
    launchless: int                   # of them, calls that owed a launch and made none
    repeated: int                     # calls that returned an object returned before
    error: str                        # why a timed call's output was refused ("" if none)
    samples: tuple[TimedSample, ...]  # each input set's last output (sent with the recheck)
    fresh_ms: tuple[float | None, ...]  # each call on a never-seen set, timed alone
    digests: tuple[tuple[int, ...], ...] = ()  # per set, `common.digest` of each kept output,
    #                                 taken before any later call: what the recheck sends must match


@dataclass(frozen=True)
class TimeReply:
    timing: dict[str, Any]            # `timing.Timing.to_dict()`: parsed into `Timing` by the parent
    timed_check: TimedCheck
    prof: dict[str, float]            # the worker's seconds per step (profiling only)


def parse(cls: type[T], obj: Any, where: str = "", omitted: tuple[str, ...] = ()) -> T:
    """`obj` (decoded JSON) as a `cls` record: every field present (but those in `omitted`, which
    take their default), none unknown, each of its declared type; else `ReplyError`."""
    where = where or cls.__name__
    if not isinstance(obj, dict):
        raise ReplyError(f"{where}: expected an object, got {type(obj).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise ReplyError(f"{where}: unknown field {unknown[0]!r}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name in fields:
        if name not in obj:
            if name in omitted:
                continue
            raise ReplyError(f"{where}: field {name!r} is missing")
        values[name] = _typed(hints[name], obj[name], f"{where}.{name}")
    return cls(**values)


def parse_reply(cls: type[T], header: dict[str, Any], op: str) -> T:
    """A whole reply header (its envelope keys dropped) as a `cls` record."""
    body = {k: v for k, v in header.items() if k not in ENVELOPE} if isinstance(header, dict) \
        else header
    return parse(cls, body, op)


def _typed(tp: Any, value: Any, where: str) -> Any:
    """`value` checked against the annotation `tp` (lists become tuples: records are frozen)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return parse(tp, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arm in (a for a in args if a is not type(None)):
            try:
                return _typed(arm, value, where)
            except ReplyError as e:
                errors.append(str(e))
        raise ReplyError(errors[0] if len(errors) == 1 else f"{where}: {value!r} fits none of {tp}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ReplyError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        return origin(_typed(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ReplyError(f"{where}: expected an object with string keys")
        return {k: _typed(args[1] if args else Any, v, f"{where}.{k}") for k, v in value.items()}
    return _scalar(tp, value, where)


def _scalar(tp: Any, value: Any, where: str) -> Any:
    ok = {bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          str: isinstance(value, str)}.get(tp)
    if ok is None:
        raise ReplyError(f"{where}: the record declares a type the parser does not know ({tp})")
    if not ok:
        raise ReplyError(f"{where}: expected {tp.__name__}, got {type(value).__name__} "
                         f"{str(value)[:40]!r}")
    return float(value) if tp is float else value


def wire(record: Any) -> dict[str, Any]:
    """A record as the JSON object `parse` reads back."""
    return dataclasses.asdict(record)
