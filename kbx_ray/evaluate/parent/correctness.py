"""The verdict: candidate outputs against reference outputs, computed in the trusted parent.

The candidate's outputs arrive as bytes from the worker; the reference runs here, in a process the
candidate never touched, so no patch of torch or of the checker can reach this comparison.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from kbx_ray.evaluate.parent import one_pass
from kbx_ray.types import ErrorKind

DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7), "float16": (5e-3, 5e-3),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass
class Verdict:
    ok: bool
    kind: str = ""          # ErrorKind when not ok
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    # an unseen case's values let through: (output, element index) -> the reference's value there
    strays: dict[tuple[int, int], tuple[float, ...]] = field(default_factory=dict)


# The dtypes whose values the checker compares, by family. Anything else an output may carry
# (torch.bits16, float8, quantized or sub-byte types) has no values `compare` can read: such an
# output is the candidate's `dtype_mismatch`, found before any comparison touches it.
_FAMILIES = {
    torch.float16: "floating point", torch.bfloat16: "floating point",
    torch.float32: "floating point", torch.float64: "floating point",
    torch.complex64: "complex", torch.complex128: "complex", torch.bool: "boolean",
    torch.uint8: "integer", torch.int8: "integer", torch.int16: "integer", torch.int32: "integer",
    torch.int64: "integer",
}


def numeric(dtype: torch.dtype) -> bool:
    """Whether the checker can compare values of `dtype`."""
    return dtype in _FAMILIES


def dtype_problem(out: list[torch.Tensor], ref: list[torch.Tensor]) -> str:
    """Why an output is not a plain tensor of its reference's dtype family ("" when each is);
    a dtype in the family but not the reference's is left to `compare`'s exact check."""
    for i, (o, r) in enumerate(zip(out, ref)):
        if not isinstance(o, torch.Tensor) or type(o) is not torch.Tensor:  # noqa: E721
            return f"output {i} is a {type(o).__name__}, not a plain tensor"
        if o.dtype != r.dtype and not numeric(o.dtype):
            return (f"output {i} is a {o.dtype} tensor, whose values the checker cannot compare "
                    f"(no numeric dtype); the reference returns {r.dtype}: return that dtype")
        family, want = _FAMILIES.get(o.dtype), _FAMILIES.get(r.dtype, str(r.dtype))
        if family != want:
            return (f"output {i} is {o.dtype} ({family or 'no numeric'} values), the reference's "
                    f"{r.dtype} ({want}): return a {r.dtype} tensor")
    return ""


def reference_outputs(fn: Any, args: tuple, kwargs: dict,
                      mutates: tuple) -> tuple[Any, list[torch.Tensor]]:
    """The reference `fn` called: what it returned, and the tensors judged (its outputs, then its
    declared-mutated inputs)."""
    out = fn(*args, **kwargs)
    bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    return out, flatten(out) + [bound[m] for m in mutates if m in bound]


def tolerance_table(task: Any) -> dict[str, tuple[float, float]]:
    """dtype name -> (rtol, atol): the defaults, with the task's `TOLERANCE` over them."""
    return {**DEFAULT_TOLERANCE, **getattr(task, "TOLERANCE", {})}


def flatten(out: Any) -> list[torch.Tensor]:
    if out is None:
        return []
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out]


def compare(out: list[torch.Tensor], ref: list[torch.Tensor], task: Any, case: dict) -> Verdict:
    """Shape, dtype and NaN placement exactly; values by the task's check or tolerance."""
    if len(out) != len(ref):
        return Verdict(False, ErrorKind.SHAPE_MISMATCH, f"{len(out)} outputs, expected {len(ref)}")
    for i, (o, r) in enumerate(zip(out, ref)):
        if tuple(o.shape) != tuple(r.shape):
            return Verdict(False, ErrorKind.SHAPE_MISMATCH,
                           f"output {i}: shape {list(o.shape)}, expected {list(r.shape)}")
        if o.dtype != r.dtype:
            return Verdict(False, ErrorKind.DTYPE_MISMATCH,
                           f"output {i}: dtype {o.dtype}, expected {r.dtype}")
    custom = getattr(task, "check", None)
    if custom is not None:
        why = custom(list(out), list(ref), case)  # on the evaluation device (tasks/README.md)
        return Verdict(False, ErrorKind.MISMATCH, f"task check: {why}") if why else Verdict(True)
    worst = Verdict(True)
    table = tolerance_table(task)
    for i, (o, r) in enumerate(zip(out, ref)):
        v = _close(o, r, table, bool(case.get("unseen")))
        worst.max_abs_err = max(worst.max_abs_err, v.max_abs_err)
        worst.max_rel_err = max(worst.max_rel_err, v.max_rel_err)
        if not v.ok:
            v.message = f"output {i}: {v.message}"
            v.max_abs_err, v.max_rel_err = worst.max_abs_err, worst.max_rel_err
            return v
        worst.strays.update({(i, j): ref_v for (_, j), ref_v in v.strays.items()})
    return worst


def recurring_strays(before: dict[tuple[int, int], tuple[float, ...]], v: Verdict,
                     out: list[torch.Tensor]) -> str:
    """Why an unseen case's stray values are the kernel's, not rounding ("" when they are not):
    `before` holds the positions that strayed on the case's earlier seeds (with the reference's
    value there), `v` is this seed's verdict on `out`. Rounding strays where the data puts it, so
    two independent draws share a stray position about (1e-5)^2 x n times (0.002 in 20M values);
    a kernel wrong at fixed places (a tail tile handled by a cheaper path, one row, a wrong mask)
    strays at the same positions on every seed, however few they are (fixture
    d6s_stray_tail_group_norm_silu). A position whose reference value did not change between the
    seeds is no evidence: the same value rounds the same way (a logspace or a positional table
    does not depend on the seed). `before` is updated."""
    same = sorted(k for k, ref_v in v.strays.items() if k in before and before[k] != ref_v)
    before.update(v.strays)
    if not same:
        return ""
    i, j = same[0]  # j: an element's index (a complex value's pair counted once)
    return (f"output {i}: {len(same)} value{'s' if len(same) > 1 else ''} outside the tolerance at "
            f"the same position{'s' if len(same) > 1 else ''} on two seeds (first at index "
            f"{_where(j, out[i].shape, False)}, whose reference value changed): an unseen case "
            "lets a few values in 1e5 stray with the data, never a kernel that is wrong at fixed "
            "places")


CHUNK = 1 << 20  # elements compared at once: float64 temporaries of ~8 MB, whatever the output


def layout_problem(shape: list[int], stride: list[int], ref_contiguous: bool) -> str:
    """Why an output's layout breaks the contract ("" when it does not): it must be dense and
    non-overlapping, and contiguous wherever the reference's output is (torch keeps an input's
    strides in many ops, so a reference on a transposed input may return a non-contiguous tensor,
    and an honest contiguous result must pass there)."""
    dims = sorted((st, sz) for sz, st in zip(shape, stride) if sz != 1)
    if any(sz == 0 for sz in shape):
        return ""
    expect = 1
    for st, sz in dims:
        if st != expect:
            return f"strides {list(stride)} for shape {list(shape)} overlap or leave gaps"
        expect *= sz
    row = 1
    for sz, st in reversed(list(zip(shape, stride))):
        if sz != 1 and st != row:
            return ("" if not ref_contiguous else f"strides {list(stride)} make a non-contiguous "
                    f"tensor of shape {list(shape)}; the reference's output is contiguous")
        row *= sz
    return ""


def _flat_real(t: torch.Tensor) -> torch.Tensor:
    """A flat view of `t`'s values, complex ones as (real, imaginary) pairs: `double()` of a complex
    tensor drops the imaginary part, so a conjugated result would pass."""
    if t.is_complex():
        return torch.view_as_real(t.resolve_conj().reshape(-1)).reshape(-1)
    return t.reshape(-1)


def _where(flat: int, shape: torch.Size, complex_: bool) -> list[int]:
    flat = flat // 2 if complex_ else flat
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat //= max(size, 1)
    return idx[::-1]


def _nan_message(nan_o: torch.Tensor, nan_r: torch.Tensor, s: int, shape: torch.Size,
                 cplx: bool, o64: torch.Tensor, r64: torch.Tensor) -> str:
    """Which side has the NaNs, how many, and the first: "the candidate returns NaN at 3
    positions where the reference is finite (first at index [17]: reference 148.2)" (a tanh
    formed from exp(2u) overflows to inf/inf = NaN for large |x|: tasks/activation/gelu)."""
    parts = []
    for mask, who, other in ((nan_o & ~nan_r, "the candidate returns", "the reference is"),
                             (nan_r & ~nan_o, "the reference has", "the candidate returns")):
        k = int(mask.sum())
        if k:
            j = int(mask.nonzero()[0, 0])
            idx = _where(s + j, shape, cplx)
            val = float(r64[j]) if who.startswith("the candidate") else float(o64[j])
            parts.append(f"{who} NaN at {k} position{'s' if k > 1 else ''} where {other} "
                         f"not NaN (first at index {idx}: "
                         f"{'reference' if who.startswith('the candidate') else 'candidate'} "
                         f"{val:.6g})")
    return "NaNs in different places: " + "; ".join(parts)


UNSEEN_STRAYS = 1e-5  # an unseen case's share of values that may stray to 2x the tolerance


def _close(o: torch.Tensor, r: torch.Tensor, table: dict[str, tuple[float, float]],
           unseen: bool = False) -> Verdict:
    """`o` against `r`, `CHUNK` elements at a time (no float64 copy of a whole output: 16M
    elements would need 2 GB on the GPU per copy).

    An unseen case (kbx_ray/unseen.py) judges whether a kernel handles sizes past the public ones,
    where a specialised kernel is wrong by whole tiles; the public cases judged its precision. Its
    larger reductions in half precision put a few values of millions just past the tolerance,
    against a reference that rounds too (on the H100, an honest linear_layernorm: 70 of 19.9M at
    1.07x it; matmul_add_residual: 11 of 21.3M), so there up to `UNSEEN_STRAYS` of the values may
    stray, none past twice the tolerance. Their positions go back in the verdict: rounding strays
    where the data puts it, so the same positions on two seeds are the kernel's (`recurring_strays`)."""
    cplx = r.is_complex()
    name = str(r.real.dtype if cplx else r.dtype).replace("torch.", "")
    of, rf = _flat_real(o), _flat_real(r)
    if not (r.is_floating_point() or cplx):
        return Verdict(True) if one_pass.all_equal(of, rf, CHUNK) else _equal(o, r, of, rf)
    rtol, atol = table.get(name, (1e-5, 1e-5))
    passed = one_pass.close_errors(of, rf, rtol, atol, CHUNK)  # the common case: one read
    if passed is not None:
        return Verdict(True, max_abs_err=passed[0], max_rel_err=passed[1])
    return _close_loop(r.shape, cplx, of, rf, rtol, atol, unseen)


def _close_loop(shape: torch.Size, cplx: bool, of: torch.Tensor, rf: torch.Tensor, rtol: float,
                atol: float, unseen: bool) -> Verdict:
    """`_close`'s verdict chunk by chunk, reading each chunk's figures back: its failures' words."""
    n = rf.numel()
    max_abs = max_rel = 0.0
    count, far, first, first_vals = 0, 0, -1, (0.0, 0.0)
    limit = int(UNSEEN_STRAYS * n) if unseen else 0
    strays: list[int] = []  # their positions, kept while they are few enough to be let through
    for s in range(0, n, CHUNK):
        o64, r64 = of[s:s + CHUNK].double(), rf[s:s + CHUNK].double()
        nan_r = r64.isnan()
        nan_o = o64.isnan()
        if not torch.equal(nan_o, nan_r):
            return Verdict(False, ErrorKind.MISMATCH,
                           _nan_message(nan_o, nan_r, s, shape, cplx, o64, r64))
        inf_r = r64.isinf()
        if not torch.equal(o64.isinf() & (o64 == r64), inf_r):
            return Verdict(False, ErrorKind.MISMATCH, "Infs differ")
        finite = ~(nan_r | inf_r)
        mag = r64.abs().where(finite, torch.zeros_like(r64))
        diff = (o64 - r64).abs().where(finite, torch.zeros_like(o64))
        if diff.numel():
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float((diff / mag.clamp_min(1e-12)).max()))
        bound = atol + rtol * mag
        bad = diff > bound
        k = int(bad.sum())
        far += int((diff > 2 * bound).sum()) if k else 0
        if k and first < 0:
            j = int(bad.nonzero()[0, 0])
            first, first_vals = s + j, (float(o64[j]), float(r64[j]))
        count += k
        if k and count <= limit:
            strays += (bad.nonzero()[:, 0] + s).tolist()
    if count and unseen and not far and count <= limit:
        return Verdict(True, max_abs_err=max_abs, max_rel_err=max_rel,
                       strays=_stray_record(strays, rf, cplx))
    if count:
        idx = _where(first, shape, cplx)
        part = (" (imaginary part)" if first % 2 else " (real part)") if cplx else ""
        return Verdict(False, ErrorKind.MISMATCH,
                       f"{count} of {n} values outside rtol={rtol} atol={atol}; "
                       f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g}; first bad index {idx}"
                       f"{part}: {first_vals[0]:.6g} vs {first_vals[1]:.6g}", max_abs, max_rel)
    return Verdict(True, max_abs_err=max_abs, max_rel_err=max_rel)


def _stray_record(strays: list[int], rf: torch.Tensor,
                  cplx: bool) -> dict[tuple[int, int], tuple[float, ...]]:
    """(output 0, element index) -> the reference's value there, for each stray flat position of
    `rf` (a complex value strays as a whole: its (real, imaginary) pair is one position)."""
    pos = {(0, j // 2 if cplx else j) for j in strays}
    return {(i, j): tuple(float(x) for x in (rf[2 * j:2 * j + 2] if cplx else rf[j:j + 1]))
            for i, j in pos}


def _equal(o: torch.Tensor, r: torch.Tensor, of: torch.Tensor, rf: torch.Tensor) -> Verdict:
    """Integer outputs: equal value for value (`of`, `rf`: their flat views), `CHUNK` at a time."""
    count, first = 0, -1
    for s in range(0, rf.numel(), CHUNK):
        bad = of[s:s + CHUNK] != rf[s:s + CHUNK]
        k = int(bad.sum())
        if k and first < 0:
            first = s + int(bad.nonzero()[0, 0])
        count += k
    if count:
        idx = _where(first, r.shape, False)
        return Verdict(False, ErrorKind.MISMATCH, f"{count} of {r.numel()} integer values differ "
                       f"(first at {idx}: {o[tuple(idx)]} vs {r[tuple(idx)]})")
    return Verdict(True)
