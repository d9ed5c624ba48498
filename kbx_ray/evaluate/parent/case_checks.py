"""A worker's reply for one case -> the parent's verdict: its observations, then its values.

The worker only reports (launches, torch ops, aliasing, mutation, determinism, the outputs' bytes);
these checks judge them, and compare the outputs with the reference the parent computed itself
(`reference_cache.py`). The reply is a typed record parsed strictly (`reply.py`, `read`): a field
missing, unknown or mistyped is a verdict that cannot be given, never an observation that passes.
A failed stage is a `Fail`, which the evaluator records on the result.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import torch

from kbx_ray.evaluate.common.digest import digest
from kbx_ray.evaluate.parent.correctness import (Verdict, compare, dtype_problem, layout_problem,
                                                  numeric, recurring_strays)
from kbx_ray.evaluate.parent.precise import admitted
from kbx_ray.evaluate.parent.admission import OOM_TEXT, is_oom
from kbx_ray.evaluate.protocol import tensor_from_wire
from kbx_ray.evaluate.reply import CallReport, OutputMeta, ReplyError, TimedCheck, parse_reply
from kbx_ray.evaluate.parent.redaction import scrub_paths
from kbx_ray.evaluate.parent.seed_dependence import seed_dependence
from kbx_ray.evaluate.parent.reference_cache import RefOutputs
from kbx_ray.types import ErrorKind, EvalResult, Stage, trim

AWAITS_GPU = "awaits_gpu"  # the flag of a CPU record whose verdict waits for a GPU


class Fail(Exception):
    def __init__(self, stage: str, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.stage, self.kind, self.msg = stage, kind, msg

    @classmethod
    def refused(cls, stage: str, reply: dict) -> Fail:
        """The worker's failed reply (`infra_error` when it names no kind)."""
        return cls(stage, reply.get("error_kind", ErrorKind.INFRA_ERROR),
                   reply.get("error_msg", ""))


def file_failure(res: EvalResult, f: Fail) -> None:
    """`f` onto `res`. A construct the Triton interpreter lacks (`unsupported_interpreter`, filed
    by the worker only for a NotImplementedError raised in the interpreter's own frames) leaves
    the CPU without a verdict: the record says it awaits a GPU (flag `awaits_gpu`) and is never a
    pass (`exec_ok` stays False, and `metrics.Tally` counts it apart), since a wrong kernel can
    hide behind such a construct (a bfloat16 atomic) as well as a right one."""
    full = scrub_paths(f.msg)
    res.stage, res.error_kind, res.error_msg = f.stage, f.kind, trim(full)
    if is_oom(full) and not is_oom(res.error_msg):  # the marker trimmed out: the retry needs it
        res.error_msg = f"{OOM_TEXT[0]}: {trim(full, 560)}"
    if f.kind == ErrorKind.UNSUPPORTED_INTERPRETER:
        res.exec_ok = False
        if AWAITS_GPU not in res.flags:
            res.flags.append(AWAITS_GPU)
        res.error_msg = trim("awaits a GPU verdict: the Triton interpreter cannot run a construct "
                             "this kernel uses, so the CPU gives no verdict (judge it on a GPU): "
                             + scrub_paths(f.msg))


R = TypeVar("R")


def read(cls: type[R], reply: dict, op: str, stage: str) -> R:
    """The worker's `op` reply as its record (`reply.parse_reply`); one that is not that record
    fails the stage as `infra_error` (no verdict can be given; the evaluator retries once on a
    fresh worker), naming the field."""
    try:
        return parse_reply(cls, reply, op)
    except ReplyError as e:
        raise Fail(stage, ErrorKind.INFRA_ERROR,
                   f"no verdict can be given: the worker's {op} reply is malformed ({e})") from None


def decode(metas: tuple[OutputMeta, ...], blobs: list, device: str) -> list:
    """The outputs `metas` describe, rebuilt from their blobs on `device`."""
    return [tensor_from_wire(m, b).to(device) for m, b in zip(metas, blobs)]


def integrity(info: CallReport, torch_compute: str, res: EvalResult,
              monitor: bool = True) -> Verdict | None:
    """Worker observations that fail a candidate whatever its values (with `monitor` off, a
    test-only setting, the launch count and torch ops decide nothing: the replay judges)."""
    if info.tampered:
        res.flags.append("tampered_runtime")
        return Verdict(False, ErrorKind.DISQUALIFIED, "the candidate patched the harness runtime")
    if info.side_stream_launches:
        return Verdict(False, ErrorKind.DISQUALIFIED,
                       "a Triton kernel was launched on a non-default CUDA stream (its time "
                       "escapes the timing events)")
    if info.stream_changed:
        return Verdict(False, ErrorKind.DISQUALIFIED,
                       "the candidate left a non-default stream current")
    if monitor and info.launches == 0 and not info.launch_free:
        # a call whose every output is empty (an early return, a zero grid Triton skips) or an
        # exact copy of an input (floor of integers) owes no launch
        return Verdict(False, ErrorKind.DISQUALIFIED, "no Triton kernel was launched")
    if info.torch_ops and monitor:
        ops = list(info.torch_ops[:5])
        flag = "torch_compute:" + ",".join(ops)
        if flag not in res.flags:
            res.flags.append(flag)
        if torch_compute == "fail":
            return Verdict(False, ErrorKind.DISQUALIFIED, f"computes with torch ops {ops}")
    if info.aliased:
        return Verdict(False, ErrorKind.OUTPUT_ALIASES_INPUT,
                       "an output shares memory with an input")
    if info.mutated:
        return Verdict(False, ErrorKind.INPUT_MUTATED,
                       f"inputs {list(info.mutated)} changed but the task does not declare them "
                       "mutated")
    if info.nondeterministic:
        return Verdict(False, ErrorKind.NONDETERMINISTIC, "two runs on the same inputs disagree")
    return None


def repeat_problem(info: CallReport, outs: list, blobs: list, ref_mod: Any, case: dict,
                   device: str) -> Verdict | None:
    """The first seed's second run, sent only when it differs bitwise from the first (handlers
    `run`), against the first at the task's policy (`compare`: its tolerance, bitwise for integer
    outputs, its own `check` where it has one). A float sum reordered by atomics differs in the
    last bits and passes; a difference the tolerance rejects is `nondeterministic`. Outputs of
    a dtype without numeric values are left to `verdict` (`dtype_mismatch`)."""
    metas = info.outputs2
    if not metas or not all(numeric(o.dtype) for o in outs):
        return None
    k = len(info.outputs)
    if len(metas) != len(outs) or len(blobs) < k + len(metas):
        return Verdict(False, ErrorKind.NONDETERMINISTIC, "two runs on the same inputs disagree "
                       "(different outputs)")
    outs2 = decode(metas, blobs[k:], device)
    v = compare(outs2, outs, ref_mod, case)
    if not v.ok:
        return Verdict(False, ErrorKind.NONDETERMINISTIC,
                       "two runs on the same inputs disagree beyond the task's tolerance (second "
                       f"run against the first: {v.message})")
    return None


Exact = Callable[[], "list | None"]  # the reference's float64 answer for the same inputs (precise.py)


def values(outs: list, ref: list, ref_mod: Any, case: dict, exact: Exact | None) -> Verdict:
    """The outputs' values against the reference's (`compare`); where they disagree, the values
    within tolerance of the float64 answer are the candidate's to keep (precise.py), and a
    verdict that passes so says how many in its message ("reference_imprecise: ...")."""
    v = compare(outs, ref, ref_mod, case)
    if v.ok or v.kind != ErrorKind.MISMATCH or exact is None or getattr(ref_mod, "check", None):
        return v
    merged, count = admitted(outs, ref, exact(), ref_mod)
    if not count:
        return v
    second = compare(outs, merged, ref_mod, case)
    if not second.ok:
        return v
    second.message = (f"reference_imprecise: {count} values outside the tolerance of the "
                      "half-precision reference are within it of the float64 answer")
    return second


def verdict(reference: RefOutputs, outs: list, info: CallReport, ref_mod: Any, case: dict,
            res: EvalResult, exact: Exact | None = None) -> Verdict:
    """The outputs against the reference's: structure, dtypes (plain tensors of the reference's
    dtype family, before any comparison touches them), layout, then values (`values`); a pass
    the float64 answer gave flags `reference_imprecise:<case>` on `res`."""
    ref, shape, contiguous = reference
    if info.structure != shape:
        return Verdict(False, ErrorKind.SHAPE_MISMATCH,
                       f"returned {info.structure}, expected {shape}")
    why = dtype_problem(outs, ref)
    if why:
        return Verdict(False, ErrorKind.DTYPE_MISMATCH, why)
    for i, (meta, c) in enumerate(zip(info.outputs, contiguous)):
        why = layout_problem(list(meta.shape), list(meta.stride), c)
        if why:
            return Verdict(False, ErrorKind.SHAPE_MISMATCH, f"output {i}: {why}")
    v = values(outs, ref, ref_mod, case, exact)
    flag = f"reference_imprecise:{case['name']}"
    if v.ok and v.message.startswith("reference_imprecise") and flag not in res.flags:
        res.flags.append(flag)
    return v


def strays_problem(before: dict, v: Verdict, outs: list) -> Verdict:
    """`v`, or a mismatch where an unseen case's strays recur at the same places as on an earlier
    seed (correctness.recurring_strays; `before` holds those and is updated)."""
    if not (v.ok and v.strays):
        return v
    why = recurring_strays(before, v, outs)
    return Verdict(False, ErrorKind.MISMATCH, why, v.max_abs_err, v.max_rel_err) if why else v


def seed_problem(outs_by_seed: list[list]) -> str:
    """Why a random task's outputs do not depend on the seed as they must ("" when they do)."""
    pairs = list(zip(*outs_by_seed[:2]))
    return ("different seeds gave identical outputs" if all(
        a.shape == b.shape and bool((a == b).all()) for a, b in pairs) else next(
        (w for w in (seed_dependence(a, b) for a, b in pairs) if w), ""))


def same_bits(a: list, b: list) -> bool:
    """Two output lists hold the same tensors bit for bit (NaNs by their bits)."""
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape
        and torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8))
        for x, y in zip(a, b))


def timed_mismatch(where: str, v: Verdict, outs: list, earlier: list[list]) -> str:
    """The message of a wrong timed or rechecked call: a stale result only where that is proven
    (the very output of an earlier input set, returned on changed inputs); otherwise the values
    that differ from the reference, as `v` names them."""
    if any(same_bits(outs, e) for e in earlier):
        return (f"{where}: returned the same output as for an earlier input set although the "
                f"inputs changed (a cached or stale result): {v.message}")
    return f"{where}: differs from the reference: {v.message}"


def timed_counts(case: dict, checked: TimedCheck) -> str:
    """Every timed call returned, launched a kernel and returned a new object (the time reply's
    counts: checked before the recheck, so they win over its failure). Returns the message head."""
    where = f"case {case['name']}, its timed calls checked after timing"
    if checked.error:
        raise Fail(Stage.TIMING, ErrorKind.RUNTIME_ERROR, f"{where}: {checked.error}")
    if checked.launchless:
        raise Fail(Stage.TIMING, ErrorKind.DISQUALIFIED, f"{where}: {checked.launchless} of "
                   f"{checked.calls} timed calls launched no Triton kernel")
    if checked.repeated:
        raise Fail(Stage.TIMING, ErrorKind.DISQUALIFIED, f"{where}: {checked.repeated} timed calls "
                   "returned an output object returned before (a cached result)")
    return where


def check_timed_calls(case: dict, checked: TimedCheck, blobs: list, device: str, ref_mod: Any,
                      reference: Callable[[int], RefOutputs],
                      exact: Callable[[int], Exact] | None = None) -> list[list]:
    """The counts (`timed_counts`), then the last output on each input set is right for that
    set's values (`reference(seed)`). Returns those outputs, one list per input set (a later
    recheck tells a stale answer by them)."""
    where = timed_counts(case, checked)
    if not checked.samples:
        raise Fail(Stage.TIMING, ErrorKind.INFRA_ERROR,
                   f"{where}: the worker sent no timed outputs")
    if len(checked.digests) != len(checked.samples):
        raise Fail(Stage.TIMING, ErrorKind.INFRA_ERROR, f"{where}: the worker sent "
                   f"{len(checked.samples)} timed outputs and {len(checked.digests)} digests")
    k, decoded = 0, []
    for sample, sums in zip(checked.samples, checked.digests):
        decoded.append(decode(sample.outputs, blobs[k:], device))
        k += len(sample.outputs)
        if tuple(digest(t) for t in decoded[-1]) != tuple(sums):
            raise Fail(Stage.TIMING, ErrorKind.DISQUALIFIED, f"{where}: the outputs of input set "
                       f"{len(decoded) - 1} changed after the timed call returned them (the "
                       "worker's process rewrote them before they were sent)")
    for j, (sample, outs) in enumerate(zip(checked.samples, decoded)):
        ref, _, contiguous = reference(sample.seed)
        why = dtype_problem(outs, ref)
        if why:
            raise Fail(Stage.TIMING, ErrorKind.DTYPE_MISMATCH, f"{where}: {why}")
        v = values(outs, ref, ref_mod, case, exact(sample.seed) if exact else None)
        for i, (meta, c) in enumerate(zip(sample.outputs, contiguous)):
            why = layout_problem(list(meta.shape), list(meta.stride), c)
            if why and v.ok:
                v = Verdict(False, ErrorKind.SHAPE_MISMATCH, f"output {i}: {why}")
        if not v.ok:
            raise Fail(Stage.TIMING, v.kind, timed_mismatch(
                f"{where}, input set {j} of {len(decoded)}", v, outs, decoded[:j] + decoded[j + 1:]))
    return decoded
