"""Numbers that left a tensor for the host, marked: what they may size, and where they may not go.
More: kbx_ray/evaluate/worker/README.md, `host_values.py`.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from kbx_ray.evaluate.worker.frames import internal
from kbx_ray.evaluate.worker.ledger import MONITOR
from kbx_ray.evaluate.worker.marked_numbers import (_KIND, INPUT, LAUNDERED, READ, InputFloat,
                                                    _has_marked, mark, plain)

ARGS: set[float] = set()          # the call's own float arguments' values (and scalar parameters')
REFUSED: list[str] = []           # this call's refusals (the worker files them as disqualified)


class HostValueError(RuntimeError):
    """A number read back to the host (or a float argument of the call) went where it may not."""


HostValueError.__module__ = "builtins"  # its traceback line names no harness module


def begin() -> None:
    """A checked call starts: no value kept, nothing refused."""
    LAUNDERED.clear()
    REFUSED.clear()


def refuse(msg: str) -> None:
    MONITOR.torch_ops.add(msg)
    REFUSED.append(msg)
    raise HostValueError(msg + " (INTEGRITY.md, class 4: numbers read back to the host may size "
                         "allocations, views and grids, never values)")


def find(obj: Any, depth: int = 0) -> str | None:
    """The strongest mark among the numbers in `obj` (nested lists/tuples/dicts), LAUNDERED
    values included; None when there is none."""
    t = type(obj)
    k = _KIND.get(t)
    if k is not None:
        return k
    if t is float and LAUNDERED:  # ints are sizes, never matched by value (an int channel)
        return LAUNDERED.get(obj)
    if (t is tuple or t is list) and depth < 4:
        best = None
        for x in obj:
            k = find(x, depth + 1)
            if k == READ:
                return k
            best = best or k
        return best
    if t is dict and depth < 4:
        return find(list(obj.values()), depth + 1)
    return None


# Torch functions whose numeric arguments are sizes, dims, indices or bounds: a marked number may
# be any of them. Every other torch function computes with (or builds a tensor of) the numbers it
# is handed. `full/new_full` take a size and a value (`_VALUE_AT`).
SIZES = frozenset("""
    empty zeros ones new_empty new_zeros new_ones empty_strided new_empty_strided view reshape
    narrow expand repeat __getitem__ split chunk unflatten select permute transpose flatten
    squeeze unsqueeze movedim moveaxis as_strided tile unfold size stride split_with_sizes
    tensor_split unbind diagonal swapaxes swapdims broadcast_to resize_ contiguous to cuda cpu
    numel dim element_size __len__ data_ptr is_contiguous storage_offset __getattribute__
""".split())
_VALUE_AT = {"full": 1, "new_full": 2, "__setitem__": 2}
# Functions that build a new tensor of the numbers they are handed and compute nothing with them:
# one of the call's own arguments, verbatim, may be such a value (`torch.full_like(x, float(other))`
# for a scalar `other` a kernel then reads, `torch.tensor(alpha)`): that moves an argument, it
# computes nothing on the host. A number the host computed from an argument (`base ** start`) is
# still refused, and so is every in-place fill (`fill_`, `x[i] = v`), which may write an output.
_BUILDERS = frozenset({"full", "full_like", "new_full", "tensor", "as_tensor", "scalar_tensor",
                       "new_tensor"})
_SIZE_KWARGS = frozenset({"size", "device", "dtype", "layout", "pin_memory", "requires_grad",
                          "memory_format", "out"})


def check_torch_call(func: Any, args: tuple, kwargs: dict) -> None:
    """Refuse a torch function that would compute with, or build a tensor of, a marked number."""
    name = getattr(func, "__name__", "")
    if name in SIZES:
        return
    at = _VALUE_AT.get(name)
    if at is not None:
        k = find((args[at:], [v for key, v in kwargs.items() if key not in _SIZE_KWARGS]))
    else:
        k = find((args, kwargs))
    if k == INPUT and name in _BUILDERS and _verbatim(args, kwargs):
        return
    if k is not None:
        refuse(f"{name}() was handed a number {_WHAT[k]}")


def _marked_values(obj: Any, depth: int = 0) -> Any:
    """The float values of the marked numbers in `obj` (as `find` walks it), kept ones included."""
    t = type(obj)
    if t in _KIND:
        yield float(int.__int__(obj)) if isinstance(obj, int) else float.__float__(obj)
    elif t is float and obj in LAUNDERED:
        yield obj
    elif (t is tuple or t is list) and depth < 4:
        for x in obj:
            yield from _marked_values(x, depth + 1)
    elif t is dict and depth < 4:
        yield from _marked_values(list(obj.values()), depth + 1)


def _verbatim(args: tuple, kwargs: dict) -> bool:
    """Every marked number handed over is one of the call's own arguments, as it was passed."""
    return all(v in ARGS for v in _marked_values((args, kwargs)))


def add_args(values: Any) -> None:
    """A scalar parameter's values were read (`eps_t.item()`): they are the call's own, verbatim."""
    for v in _marked_values(values):
        ARGS.add(v)


_WHAT = {READ: "read back from tensor values on the host",
         INPUT: "from the call's own float arguments (build it in a kernel instead)"}


def launch_values(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A kernel launch's arguments with marked numbers made plain; a `read` number (or a value
    kept from one) as a scalar argument or constexpr is refused. The grid may hold them."""
    if not MONITOR.watching():
        return args, kwargs
    for i, a in enumerate(args):
        if find(a) == READ:
            refuse(f"a kernel's argument {i} is a number read back from tensor values on the host")
    for key, a in kwargs.items():
        if key != "grid" and find(a) == READ:
            refuse(f"a kernel's argument {key!r} is a number read back from tensor values on the "
                   "host")
    if _has_marked(args) or _has_marked(kwargs.values()):
        args = tuple(plain(a) for a in args)
        kwargs = {k: plain(v) for k, v in kwargs.items()}
    return args, kwargs


def check_output(out: Any) -> None:
    """A returned number read back to the host (or one of a structure) is host compute."""
    if find(out) == READ:
        refuse("the output holds a number read back from tensor values on the host")


def mark_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's float arguments marked `input` (ints are dims and sizes: structure, left
    plain); tensors and everything else as they are."""
    ARGS.clear()

    def m(v: Any) -> Any:
        t = type(v)
        if t is float:
            ARGS.add(v)
            return InputFloat(v)
        if t is list or t is tuple:
            return t(m(x) for x in v) if any(type(x) in (float, list, tuple) for x in v) else v
        return v
    return tuple(m(a) for a in args), {k: m(v) for k, v in kwargs.items()}


def make_mode() -> Any:
    """The TorchFunctionMode held around the candidate's call. It sees every tensor method,
    base-class calls too (`super(torch.Tensor, x).tolist()` is routed through
    `torch.Tensor.tolist`, the wrapped reader), and refuses marked numbers in value arguments."""
    from torch.overrides import TorchFunctionMode

    class _HostValues(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if MONITOR.watching() and not internal(sys._getframe(1)):
                check_torch_call(func, args, kwargs)
            return func(*args, **kwargs)

    return _HostValues()


_MATH = ("fsum prod sqrt exp exp2 expm1 log log2 log10 log1p pow fabs fmod remainder copysign "
         "hypot dist ldexp frexp modf erf erfc gamma lgamma sin cos tan asin acos atan atan2 sinh "
         "cosh tanh asinh acosh atanh cbrt isqrt degrees radians nextafter ulp comb perm gcd lcm "
         "factorial sumprod").split()
_ITERABLE = frozenset({"fsum", "prod", "dist", "sumprod"})


def install_math() -> None:
    """`math` functions return plain floats from marked ones: wrap them to mark their result."""
    for name in _MATH:
        f = getattr(math, name, None)
        if f is None or getattr(f, "_kbx_wrapped", False):
            continue

        def wrapped(*a: Any, __f: Any = f, __it: bool = name in _ITERABLE, **k: Any) -> Any:
            if not MONITOR.watching():
                return __f(*a, **k)
            if __it:
                a = tuple(x if isinstance(x, (int, float)) else list(x) for x in a)
            kind = find(a)
            return mark(__f(*a, **k), kind) if kind else __f(*a, **k)
        wrapped.__name__, wrapped.__doc__ = name, f.__doc__
        wrapped._kbx_wrapped = True  # type: ignore[attr-defined]
        setattr(math, name, wrapped)
