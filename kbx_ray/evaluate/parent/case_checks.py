"""A worker's reply for one case -> the parent's verdict: its observations, then its values.

The worker only reports (launches, torch ops, aliasing, mutation, determinism, the outputs' bytes);
these checks judge them, and compare the outputs with the reference the parent computed itself
(`reference_cache.py`). A failed stage is a `Fail`, which the evaluator records on the result.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from kbx_ray.evaluate.parent.correctness import (Verdict, compare, layout_problem, recurring_strays,
                                                  seed_dependence)
from kbx_ray.evaluate.parent.precise import admitted
from kbx_ray.evaluate.protocol import tensor_from_wire
from kbx_ray.evaluate.parent.reference_cache import RefOutputs
from kbx_ray.types import EvalResult


class Fail(Exception):
    def __init__(self, stage: str, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.stage, self.kind, self.msg = stage, kind, msg


def integrity(info: dict, torch_compute: str, res: EvalResult) -> Verdict | None:
    """Worker observations that fail a candidate whatever its values."""
    if info.get("tampered"):
        res.flags.append("tampered_runtime")
        return Verdict(False, "disqualified", "the candidate patched the harness runtime")
    if info.get("side_stream_launches"):
        return Verdict(False, "disqualified", "a Triton kernel was launched on a non-default "
                       "CUDA stream (its time escapes the timing events)")
    if info.get("stream_changed"):
        return Verdict(False, "disqualified", "the candidate left a non-default stream current")
    if info.get("launches", 0) == 0 and not info.get("launch_free"):
        # a call whose every output is empty (an early return, a zero grid Triton skips) or an
        # exact copy of an input (floor of integers) owes no launch
        return Verdict(False, "disqualified", "no Triton kernel was launched")
    if info.get("torch_ops"):
        flag = "torch_compute:" + ",".join(info["torch_ops"][:5])
        if flag not in res.flags:
            res.flags.append(flag)
        if torch_compute == "fail":
            return Verdict(False, "disqualified", f"computes with torch ops {info['torch_ops'][:5]}")
    if info.get("aliased"):
        return Verdict(False, "output_aliases_input", "an output shares memory with an input")
    if info.get("mutated"):
        return Verdict(False, "input_mutated", f"inputs {info['mutated']} changed but the task "
                                               "does not declare them mutated")
    if info.get("nondeterministic"):
        return Verdict(False, "nondeterministic", "two runs on the same inputs disagree")
    return None


def repeat_problem(info: dict, outs: list, blobs: list, ref_mod: Any, case: dict,
                   device: str) -> Verdict | None:
    """The first seed's second run, sent only when it differs bitwise from the first (handlers
    `run`), against the first at the task's policy (`compare`: its tolerance, bitwise for integer
    outputs, its own `check` where it has one). A float sum reordered by atomics differs in the
    last bits and passes; a difference the tolerance rejects is `nondeterministic`."""
    metas = info.get("outputs2")
    if not metas:
        return None
    k = len(info.get("outputs") or [])
    if len(metas) != len(outs) or len(blobs) < k + len(metas):
        return Verdict(False, "nondeterministic", "two runs on the same inputs disagree "
                       "(different outputs)")
    outs2 = [tensor_from_wire(m, b).to(device) for m, b in zip(metas, blobs[k:])]
    v = compare(outs2, outs, ref_mod, case)
    if not v.ok:
        return Verdict(False, "nondeterministic", "two runs on the same inputs disagree beyond "
                       f"the task's tolerance (second run against the first: {v.message})")
    return None


Exact = Callable[[], "list | None"]  # the reference's float64 answer for the same inputs (precise.py)


def values(outs: list, ref: list, ref_mod: Any, case: dict, exact: Exact | None) -> Verdict:
    """The outputs' values against the reference's (`compare`); where they disagree, the values
    within tolerance of the float64 answer are the candidate's to keep (precise.py), and a
    verdict that passes so says how many in its message ("reference_imprecise: ...")."""
    v = compare(outs, ref, ref_mod, case)
    if v.ok or v.kind != "mismatch" or exact is None or getattr(ref_mod, "check", None):
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


def verdict(reference: RefOutputs, outs: list, info: dict, ref_mod: Any, case: dict,
            res: EvalResult, exact: Exact | None = None) -> Verdict:
    """The outputs against the reference's: structure, layout, then values (`values`); a pass
    the float64 answer gave flags `reference_imprecise:<case>` on `res`."""
    ref, shape, contiguous = reference
    if info.get("structure") != shape:
        return Verdict(False, "shape_mismatch", f"returned {info.get('structure')}, expected {shape}")
    for i, (meta, c) in enumerate(zip(info.get("outputs", []), contiguous)):
        why = layout_problem(meta.get("shape", []), meta.get("stride", []), c)
        if why:
            return Verdict(False, "shape_mismatch", f"output {i}: {why}")
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
    return Verdict(False, "mismatch", why, v.max_abs_err, v.max_rel_err) if why else v


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


def check_timed_calls(case: dict, checked: dict, blobs: list, device: str, ref_mod: Any,
                      reference: Callable[[int], RefOutputs],
                      exact: Callable[[int], Exact] | None = None) -> list[list]:
    """Every timed call launched a kernel and returned a new object, and the last output on
    each input set is right for that set's values (`reference(seed)`). Returns those outputs,
    one list per input set (a later recheck tells a stale answer by them)."""
    where = f"case {case['name']}, its timed calls checked after timing"
    if checked.get("error"):
        raise Fail("timing", "runtime_error", f"{where}: {checked['error']}")
    if checked.get("launchless"):
        raise Fail("timing", "disqualified", f"{where}: {checked['launchless']} of "
                   f"{checked.get('calls')} timed calls launched no Triton kernel")
    if checked.get("repeated"):
        raise Fail("timing", "disqualified", f"{where}: {checked['repeated']} timed calls "
                   "returned an output object returned before (a cached result)")
    if not checked.get("samples"):
        raise Fail("timing", "infra_error", f"{where}: the worker sent no timed outputs")
    k, decoded = 0, []
    for sample in checked["samples"]:
        metas = sample["outputs"]
        decoded.append([tensor_from_wire(m, b).to(device) for m, b in zip(metas, blobs[k:])])
        k += len(metas)
    for j, (sample, outs) in enumerate(zip(checked["samples"], decoded)):
        metas = sample["outputs"]
        ref, _, contiguous = reference(int(sample["seed"]))
        v = values(outs, ref, ref_mod, case, exact(int(sample["seed"])) if exact else None)
        for i, (meta, c) in enumerate(zip(metas, contiguous)):
            why = layout_problem(meta.get("shape", []), meta.get("stride", []), c)
            v = Verdict(False, "shape_mismatch", f"output {i}: {why}") if why and v.ok else v
        if not v.ok:
            raise Fail("timing", v.kind, timed_mismatch(
                f"{where}, input set {j} of {len(decoded)}", v, outs, decoded[:j] + decoded[j + 1:]))
    return decoded
