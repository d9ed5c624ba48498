"""Runtime guards inside the sandbox worker: launches, aten compute, memory bounds, tampering.

They complement the static checks: a candidate can hide a torch call from the AST (a method call on
a tensor looks like any other call), but not from the dispatcher. Triton launches are counted by
wrapping the launcher classes, and the dispatch monitor is paused while a Triton kernel runs,
because the CPU interpreter itself moves data with aten ops. Under the interpreter every load and
store is also bounds-checked against the tensors the kernel was given. Standard library, torch and
(with triton's interpreter) numpy only.
"""
from __future__ import annotations

import math
import operator
import os
import sys
from typing import Any

# Aten op packets by what they do to values (exact names: a prefix such as 'copy' would admit
# copysign). ALLOC makes a fresh storage of constants; VIEWS and META never touch values; MOVES copy
# values unchanged (allowed on input data, e.g. `x.contiguous()` before a launch, but they may not
# write an output); READS bring values to the host. Every other op computes.
ALLOC = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
    "scalar_tensor",
})
CONST_FILLS = frozenset({"fill_.Scalar", "zero_.default", "fill_.int", "fill_.float"})
VIEWS = frozenset({
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand",
    "squeeze", "unsqueeze", "select", "slice", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "detach", "alias", "diagonal", "movedim", "unflatten", "view_as_real",
    "view_as_complex", "real", "imag", "expand_as", "view_as", "unfold",
})
META = frozenset({
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "is_same_size",
    "size", "stride", "numel", "dim", "_has_compatible_shallow_copy_type", "result_type",
    "is_non_overlapping_and_dense", "is_strides_like_format", "_nested_tensor_size",
})
MOVES = frozenset({
    "copy_", "clone", "_to_copy", "contiguous", "_copy_from", "_copy_from_and_resize",
    "lift_fresh", "lift_fresh_copy", "lift", "constant_pad_nd", "_to_dense",
})
READS = frozenset({"_local_scalar_dense", "item", "is_nonzero", "equal"})
_TORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__import__("torch").__file__)))
# Triton's own data movement, by code object (file suffix, function): the interpreter's copies to
# and from the host, autotune's reset_to_zero/restore_value and its benchmark buffers. Candidate
# callables that Triton calls (grids, hooks, heuristics, prune/perf models) run in frames of their
# own and stay monitored; so does the kernel body under the interpreter.
INTERNAL = frozenset({
    ("triton/runtime/interpreter.py", "_to_cpu"), ("triton/runtime/interpreter.py", "_from_cpu"),
    ("triton/runtime/interpreter.py", "_init_args_hst"),
    ("triton/runtime/interpreter.py", "_restore_args_dev"),
    ("triton/runtime/autotuner.py", "_pre_hook"), ("triton/runtime/autotuner.py", "_post_hook"),
    ("triton/testing.py", "do_bench"),
})
_HARNESS_FILES = ("kbx_ray/evaluate/guards.py", "kbx_ray/evaluate/interp_compat.py")


def _internal(frame: Any) -> bool:
    """True when the innermost frame outside torch's own Python is Triton's or the harness's data
    movement: such ops are not the candidate's."""
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR + "/torch/"):
        frame = frame.f_back
    if frame is None:
        return False
    code = frame.f_code
    path = code.co_filename.replace(os.sep, "/")
    if path.endswith(_HARNESS_FILES):
        return True
    return any(path.endswith(f) and code.co_name == n for f, n in INTERNAL)


def _ptr(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
        return 0


class Monitor:
    """What the candidate's host code did while `active`: Triton launches, and a ledger of storages.

    `tainted` storages hold values derived from the inputs (inputs, and anything an op or a launch
    made from them); `written` maps a storage to the torch op that last wrote values into it;
    `fresh` storages came from an allocation of constants. `torch_ops` collects the findings: a
    computing op on input data, a host read of input data, and (at `finish`) an output or a
    declared-mutated input whose values a torch op wrote instead of a Triton kernel.
    """

    def __init__(self) -> None:
        self.active = False
        self.paused = 0
        self.launches = 0
        self.torch_ops: set[str] = set()
        self.spans: list[tuple[int, int]] = []   # byte ranges of the current launch's tensors
        self.tainted: set[int] = set()
        self.written: dict[int, str] = {}
        self.fresh: set[int] = set()
        self.passed: set[tuple] = set()   # the input tensors exactly as the call received them
        self.scalars: set[int] = set()    # inputs whose whole storage is one value
        self.by_kernel: set[int] = set()  # fresh allocations a launch was handed (its results)
        self.sizes_read = 0               # one-value kernel results read (output sizes)
        self.movement = False             # the task only moves data (its cost has no flops)

    def reset(self, inputs: tuple = ()) -> None:
        self.launches = 0
        self.torch_ops = set()
        self.written, self.fresh = {}, set()
        ts = _tensors_of(inputs)
        self.tainted = {p for p in map(_ptr, ts) if p}
        self.passed = {_layout(t) for t in ts}
        self.scalars = {_ptr(t) for t in ts if _one_value(t)}  # scalar parameters as tensors
        self.by_kernel, self.sizes_read = set(), 0

    def watching(self) -> bool:
        return self.active and not self.paused

    def op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Account one aten op the candidate's code dispatched."""
        full = str(getattr(func, "__name__", func))
        name = full.split(".")[0]
        if name in VIEWS or name in META or full in CONST_FILLS:
            return
        operands = _tensors_of((args, kwargs))
        results = _tensors_of(out if isinstance(out, (list, tuple)) else [out])
        if name in ALLOC:
            for p in map(_ptr, results):
                self.written.pop(p, None)
                self.tainted.discard(p)
                self.by_kernel.discard(p)
                self.fresh.add(p)
            return
        hot = any(p in self.tainted for p in map(_ptr, operands))
        if name in READS:
            if hot and not all(self._may_read(t) for t in operands):
                self.torch_ops.add(f"{name} read input values on the host")
            return
        if hot and (name not in MOVES or not self._pure_move(name, operands, results)):
            self.torch_ops.add(full)
        dests = [_ptr(t) for t in results]
        if name.endswith("_") and operands:
            dests.append(_ptr(operands[0]))
        dests += [_ptr(t) for t in _tensors_of((kwargs or {}).get("out"))]
        for p in filter(None, dests):
            self.written[p] = full
            self.fresh.discard(p)
            if hot:
                self.tainted.add(p)
            elif p not in map(_ptr, operands):
                self.tainted.discard(p)

    def _pure_move(self, name: str, operands: list[Any], results: list[Any]) -> bool:
        """A move of input data that computes nothing: the dtype cast is exact (`x.float()` of
        fp16, never `x.to(torch.int32)`), and on a data-movement task the very tensor the call
        received is copied whole into a plain contiguous buffer (`x.contiguous()`), since there a
        permuted, diagonal, padded or indexed copy is the answer itself."""
        if name == "copy_" and len(operands) > 1:
            dst, src = operands[0], operands[1]
        elif operands and results:
            dst, src = results[0], operands[0]
        else:
            return True
        if not _lossless(src.dtype, dst.dtype):
            return False
        if not self.movement:
            return True
        return (name in ("copy_", "clone", "_to_copy", "contiguous") and _layout(src) in self.passed
                and dst.shape == src.shape and dst.is_contiguous() and dst.storage_offset() == 0)

    def read(self, t: Any, how: str) -> None:
        """Values of `t` leave torch for the host (`tolist`, `numpy`) without a dispatched op."""
        if self.watching() and _ptr(t) in self.tainted and not self._may_read(t):
            self.torch_ops.add(f"{how}() read input values on the host")

    def _may_read(self, t: Any) -> bool:
        """Host reads allowed on input-derived data: a scalar parameter, and up to 8 one-value
        results of kernels per call (a count that sizes the next allocation, as masked_select
        needs); a one-value clone made by torch is neither."""
        p = _ptr(t)
        if p in self.scalars:
            return True
        if p in self.by_kernel and p not in self.written and _one_value(t) and self.sizes_read < 8:
            self.sizes_read += 1
            return True
        return False

    def host_map(self, t: Any, others: tuple, how: str) -> None:
        """`Tensor.apply_/map_/map2_` run a Python callable per element, in place, dispatching
        nothing: host compute on whatever they touch, and a torch write of `t`."""
        if not self.watching():
            return
        ts = [t, *_tensors_of(others)]
        if any(_ptr(x) in self.tainted for x in ts):
            self.torch_ops.add(f"{how}() computed on input values on the host")
            self.tainted.add(_ptr(t))
        self.written[_ptr(t)] = how
        self.fresh.discard(_ptr(t))

    def launched(self, args: Any, kwargs: Any) -> None:
        """A kernel may write anything it was handed: input taint spreads to all its tensors."""
        ptrs = [p for p in map(_ptr, _tensors_of((args, kwargs))) if p]
        self.by_kernel.update(p for p in ptrs if p in self.fresh)
        if any(p in self.tainted for p in ptrs):
            self.tainted.update(ptrs)

    def finish(self, returned: list[Any], mutated: list[Any], inputs: list[Any]) -> None:
        """Only Triton kernels write the values of an output or of a declared-mutated input."""
        own = {_ptr(t) for t in inputs}
        for kind, ts in (("output", returned), ("mutated input", mutated)):
            for t in ts:
                p = _ptr(t)
                if not p:
                    continue
                if p in self.written:
                    self.torch_ops.add(f"{self.written[p]} wrote the {kind} (only kernels may)")
                elif kind == "output" and p not in own and p not in self.fresh:
                    self.torch_ops.add("an output not allocated by torch.empty/zeros/full (only kernels may fill one)")


def _layout(t: Any) -> tuple:
    return (_ptr(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _lossless(a: Any, b: Any) -> bool:
    """Every value of dtype `a` is exactly representable in dtype `b`."""
    import torch

    if a == b or a == torch.bool:
        return True
    if a.is_complex or b.is_complex or b == torch.bool:
        return False
    fa, fb = a.is_floating_point, b.is_floating_point
    if fa and fb:
        ia, ib = torch.finfo(a), torch.finfo(b)
        return ib.eps <= ia.eps and ib.max >= ia.max and ib.tiny <= ia.tiny
    if fa:
        return False
    ia = torch.iinfo(a)
    if fb:
        return ia.bits <= -math.log2(torch.finfo(b).eps) + 1
    ib = torch.iinfo(b)
    return ib.min <= ia.min and ib.max >= ia.max


def movement_task(task: Any) -> bool:
    """A task whose every case costs no flops (permute_copy, diag_embed, index_*, kv_cache_append,
    triu): its answer is data movement, so torch moves of its data must not produce it."""
    try:
        return all(task.cost(c)["flops"] == 0 for c in task.CASES)
    except Exception:  # noqa: BLE001 - a suite without costs: not known to be one
        return False


def _one_value(t: Any) -> bool:
    """A one-element storage: reading an input that is one (a scalar parameter passed as a tensor)
    is not reading a result. Only inputs qualify: a one-element clone of input data does not."""
    try:
        return t.untyped_storage().nbytes() <= t.element_size()
    except Exception:  # noqa: BLE001
        return False


MONITOR = Monitor()


def install_launch_counter() -> None:
    """Wrap the JIT launchers (compiled and interpreted) so every launch is counted. The monitor
    stays on during the launch: only Triton's own data movement is exempt (`INTERNAL`)."""
    import triton.runtime.jit as jit

    classes: list[Any] = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - older triton
        pass
    for cls in classes:
        original = cls.run

        def run(self: Any, *args: Any, __orig: Any = original, **kwargs: Any) -> Any:
            MONITOR.launches += 1
            try:
                return __orig(self, *args, **kwargs)
            finally:
                if MONITOR.watching():
                    MONITOR.launched(args, kwargs)

        cls.run = run


def install_value_readers() -> None:
    """`Tensor.tolist/numpy/__array__` read values, and `apply_/map_/map2_` compute on them,
    without dispatching an op: report them."""
    import torch

    for name in ("tolist", "numpy", "__array__"):
        original = getattr(torch.Tensor, name)

        def reader(self: Any, *a: Any, __orig: Any = original, __name: str = name,
                   **k: Any) -> Any:
            MONITOR.read(self, __name.strip("_"))
            return __orig(self, *a, **k)

        setattr(torch.Tensor, name, reader)
    for name in ("apply_", "map_", "map2_"):
        original = getattr(torch.Tensor, name)

        def mapper(self: Any, *a: Any, __orig: Any = original, __name: str = name,
                   **k: Any) -> Any:
            MONITOR.host_map(self, a, __name)
            return __orig(self, *a, **k)

        setattr(torch.Tensor, name, mapper)


def install_interpreter_namespace() -> None:
    """The interpreter execs each rewritten kernel in the candidate module's own globals after
    copying its module globals (`inspect`, `np`, `triton`, ...) into them. Exec it in a private
    copy instead, holding only the two helpers the rewritten code names."""
    try:
        from triton.runtime import interpreter as it
    except ImportError:  # pragma: no cover
        return
    helpers = {k: vars(it)[k] for k in ("interpreter_semantic", "_InterpreterComparison")
               if k in vars(it)}

    def _compile_and_exec(self: Any, transformed_ast: Any) -> Any:
        code = compile(transformed_ast, filename=self.filename, mode="exec")
        namespace = {**self.fn.__globals__, **helpers}
        local = {**self.kwargs}
        exec(code, namespace, local)  # noqa: S102 - the interpreter's own step, in a copy
        return local[self.fn.__name__]

    it.FunctionRewriter._compile_and_exec = _compile_and_exec


def install_bounds_checker() -> None:
    """Under the interpreter, fail a load or store whose active lanes leave every tensor argument.

    On a GPU such an access reads a neighbour's memory or faults; under the interpreter it reads or
    corrupts the worker's own heap, silently. A missing mask or an off-by-one bound then passes on
    values alone, so the access itself is checked where it happens.
    """
    import numpy as np
    from triton.runtime import interpreter as it

    init = it.GridExecutor._init_args_hst

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        spans = []
        for t in _tensors_of((args_hst, kwargs_hst)):
            st = t.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        MONITOR.spans = spans
        return args_hst, kwargs_hst

    def check(ptrs: Any, mask: Any, what: str) -> None:
        p = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        m = (np.ones(p.shape, bool) if mask is None
             else np.broadcast_to(np.asarray(mask.data, bool), p.shape))
        active = p[m]
        if active.size == 0 or not MONITOR.spans:
            return
        size = np.uint64(it._get_np_dtype(ptrs.get_element_ty()).itemsize)
        ok = np.zeros(active.shape, bool)
        for lo, hi in MONITOR.spans:
            ok |= (active >= np.uint64(lo)) & (active + size <= np.uint64(hi))
        if not ok.all():
            raise IndexError(f"out-of-bounds {what}: {int((~ok).sum())} of {active.size} active "
                             "lanes address memory outside every tensor passed to the kernel "
                             "(a missing or wrong mask?)")

    b = it.InterpreterBuilder
    load, store, rmw = b.create_masked_load, b.create_masked_store, b.create_atomic_rmw

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "load")
        return load(self, ptrs, mask, *a)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *a)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptr, mask, "atomic")
        return rmw(self, op, ptr, value, mask, *a)

    b.create_masked_load, b.create_masked_store = create_masked_load, create_masked_store
    b.create_atomic_rmw = create_atomic_rmw
    it.GridExecutor._init_args_hst = _init_args_hst


def _tensors_of(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors_of(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors_of(x)]
    base = getattr(obj, "base", None)  # triton's TensorWrapper and TensorDescriptor
    return [base] if isinstance(base, torch.Tensor) else []


def make_dispatch_mode() -> Any:
    """A TorchDispatchMode that accounts every aten op the candidate's code runs (`Monitor.op`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if MONITOR.watching() and not _internal(sys._getframe(1)):
                MONITOR.op(func, args, kwargs, out)
            return out

    mode = _Watch()
    import torch

    with mode:  # the first entry imports torch._dynamo, which rewraps torch.manual_seed: do it now,
        torch.zeros(1).add_(1)  # before the sentinels are taken, outside any candidate's call
    return mode


class Sentinels:
    """Identities of everything a candidate would patch to fool the harness.

    Library namespaces (builtins, torch, torch.Tensor and its bases, torch.cuda, the Triton
    launchers and interpreter, time, json) are watched by the identity of their callables, the
    harness's own module globals (`harness`, plus this module's) by the identity of every value,
    and classes by their number of names too (`T.clone = f` adds a name that shadows
    TensorBase.clone). After each call the worker asks `changed()`: anything replaced, deleted or
    added to a class means the candidate tampered with the runtime, and the warm worker is thrown
    away before it judges anyone else. Modules may gain names: torch adds lazily imported
    submodules as it goes.
    """

    def __init__(self, harness: tuple[dict[str, Any], ...] = ()) -> None:
        import builtins
        import json
        import time

        import torch
        import triton.runtime.jit as jit

        spaces: dict[str, Any] = {"builtins": vars(builtins), "torch": vars(torch),
                                  "time": vars(time), "json": vars(json),
                                  "torch.cuda": vars(torch.cuda), "JITFunction": vars(jit.JITFunction),
                                  "Monitor": vars(Monitor), "Event": vars(torch.cuda.Event)}
        for cls in torch.Tensor.__mro__[:-1]:
            spaces[f"Tensor:{cls.__name__}"] = vars(cls)
        try:
            from triton.runtime import interpreter as it

            for name in ("InterpreterBuilder", "GridExecutor", "InterpretedFunction",
                         "FunctionRewriter"):
                spaces[name] = vars(getattr(it, name))
        except ImportError:  # pragma: no cover
            pass
        watched = [(s, ns, [k for k, v in list(ns.items()) if callable(v)
                            or isinstance(v, (staticmethod, classmethod, property))])
                   for s, ns in spaces.items()]
        watched += [(f"harness{i}", ns, list(ns)) for i, ns in enumerate((globals(), *harness))]
        self.groups = [(s, ns, keys, operator.itemgetter(*keys), tuple(ns[k] for k in keys))
                       for s, ns, keys in watched if len(keys) > 1]
        self.sizes = [(s, ns, len(ns)) for s, ns in spaces.items()
                      if isinstance(ns, type(vars(Monitor)))]

    def changed(self) -> list[str]:
        """The names whose identity changed since construction (empty when nothing was touched).
        Each namespace is compared in one C-level pass; names are worked out only on a change."""
        out = []
        for s, ns, keys, get, orig in self.groups:
            try:
                same = get(ns) == orig  # items compare by identity first (C speed)
            except Exception:  # noqa: BLE001 - a deleted name, or a replacement with a strange __eq__
                same = False
            if not same:
                out += [f"{s}.{k}" for k, o in zip(keys, orig) if ns.get(k, _GONE) is not o]
        return out + [f"{s}.<names>" for s, ns, n in self.sizes if len(ns) != n]


_GONE = object()
