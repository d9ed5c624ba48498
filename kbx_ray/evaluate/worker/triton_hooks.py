"""Hooks on Triton's launchers and interpreter: the launch counter, the bounds checker and the
interpreter's private namespace.

Every launch is counted (a call that launched nothing is disqualified) and tells the storage
ledger which tensors a kernel was handed. Under the CPU interpreter every load and store is also
bounds-checked against those tensors, and each rewritten kernel is exec'd in a copy of its module's
globals. Standard library, torch, triton and (with triton's interpreter) numpy only.
"""
from __future__ import annotations

from typing import Any, Callable

from kbx_ray.evaluate.worker import grid_capture
from kbx_ray.evaluate.worker.host_values import launch_values
from kbx_ray.evaluate.worker.ledger import MONITOR
from kbx_ray.evaluate.worker.recorder import RECORDER
from kbx_ray.evaluate.common.trees import tensors


def _side_stream_probe() -> Any:
    """A check, run at every launch, that the current CUDA stream is the default one. A kernel on
    another stream escapes the default-stream timing events; the wait after a timed call returns
    shows asynchronous side work, but not side work the call waits for on the host, which the
    gated feed hides with the rest of the host time. Triton launches on the current stream, so the
    launch itself says where it ran."""
    import torch

    if not torch.cuda.is_available():
        return lambda: False
    raw, defaults = torch._C._cuda_getCurrentRawStream, {}

    def on_side_stream() -> bool:
        dev = torch.cuda.current_device()
        if dev not in defaults:
            defaults[dev] = torch.cuda.default_stream(dev).cuda_stream
        # a capture is Triton's own autotuner benchmarking through a CUDA graph (candidates may
        # not capture: graphs are refused statically)
        return raw(dev) != defaults[dev] and not torch.cuda.is_current_stream_capturing()

    return on_side_stream


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
    on_side_stream = _side_stream_probe()
    for cls in classes:
        cls.run = _counted(cls.run, on_side_stream)


def _counted(original: Any, on_side_stream: Callable[[], bool]) -> Callable:
    """`original` (a launcher's run) counted and recorded. The original is held in this closure,
    never in a parameter: no keyword a candidate passes (`__orig=`) can stand in for it."""

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = launch_values(args, kwargs)  # numbers read back: never kernel values
        refuse_addresses(args, kwargs)  # no data_ptr() handed over as an integer
        MONITOR.launches += 1
        if on_side_stream():
            MONITOR.side_launches += 1
        step = None if kwargs.get("warmup") else RECORDER.launch(self, args, kwargs)
        grid, seen = kwargs.get("grid"), []
        if step is not None and callable(grid):  # the grid Triton resolves is the one recorded
            kwargs["grid"] = grid_capture.capture(grid, seen)  # not a harness frame
        try:
            kernel = original(self, *args, **kwargs)
        finally:
            if MONITOR.watching():
                MONITOR.launched(args, kwargs)
        RECORDER.resolved(step, seen[-1] if callable(grid) and seen else grid)
        refuse_integer_pointers(kernel)
        return kernel

    return run


_INT_POINTERS: dict[int, bool] = {}  # id(compiled kernel) -> its IR makes a pointer from an int


def refuse_integer_pointers(kernel: Any) -> None:
    """On a GPU, refuse a compiled kernel whose Triton IR forms a pointer from an integer
    (`tt.int_to_ptr`: `x_ptr.to(tl.int64)` cast back, or `tl.cast(..., bitcast=True)` to a
    pointer type), whatever spelling the source used; the static layer refuses the spellings it
    knows and the interpreter refuses the cast on the CPU, where `run` returns no compiled kernel.
    A kernel addresses only the tensors it is handed (issue 26, class 1). The verdict is checked
    once per compiled kernel; the launch has run, and the call ends disqualified."""
    asm = getattr(kernel, "asm", None)
    if not isinstance(asm, dict) and not hasattr(asm, "get"):
        return
    bad = _INT_POINTERS.get(id(kernel))
    if bad is None:
        bad = _INT_POINTERS[id(kernel)] = "tt.int_to_ptr" in str(asm.get("ttir", "") or "")
    if bad:
        MONITOR.torch_ops.add("a kernel made a pointer from an integer")
        MONITOR.denied = True
        raise TypeError("a kernel made a pointer from an integer (tt.int_to_ptr in its IR): "
                        "kernels address only the tensors they are given")



def refuse_addresses(args: Any, kwargs: Any) -> None:
    """Refuse a launch that hands a kernel an integer inside the memory of one of its tensor
    arguments or of the call's inputs (a `data_ptr()` smuggled past the static layer): a kernel
    addresses only the tensors it is given (issue 26, class 1). Sizes, strides and seeds are far
    below any heap address, so no honest integer falls there."""
    vals = [v for v in _flat((args, kwargs)) if isinstance(v, int) and not isinstance(v, bool)
            and v > 4096]
    if not vals:
        return
    spans = []
    for t in tensors((args, kwargs), wrapped=True):
        try:
            st = t.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        except Exception:  # noqa: BLE001 - a tensor without storage
            continue
    for ptr, off, shape, stride, dtype in MONITOR.passed:
        size = dtype.itemsize if hasattr(dtype, "itemsize") else 8
        reach = sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if all(shape) else 0
        spans.append((ptr + off * size, ptr + (off + reach) * size))
    starts = MONITOR.tainted | MONITOR.fresh
    for v in vals:
        if v in starts or any(lo <= v <= hi for lo, hi in spans):
            MONITOR.torch_ops.add("a kernel was handed a tensor's address as an integer")
            MONITOR.denied = True
            raise TypeError("a kernel was handed a tensor's address as an integer (data_ptr): "
                            "pass the tensor itself; kernels address only the tensors they are "
                            "given")


def _flat(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _flat(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _flat(v)]
    return [obj]


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
    """Under the interpreter, fail a load or store whose active lanes leave the tensor argument
    their pointer was derived from.

    On a GPU such an access reads a neighbour's memory or faults; under the interpreter it reads or
    corrupts the worker's own heap, silently. A missing mask or an off-by-one bound then passes on
    values alone, so the access itself is checked where it happens. Each pointer lane carries the
    argument it came from (its provenance: pointer arithmetic, views and `where` keep it), and is
    bounded by that argument's own extent, the bytes its shape and strides reach from its offset,
    not its storage: a kernel handed `x[:0]` or a narrow view may not read the rest of `x`. A
    pointer no argument handed over (an integer cast to one, a pointer loaded from memory) is
    refused and disqualifies (issue 26, class 1).
    """
    import numpy as np
    from triton.runtime import interpreter as it

    table: dict[str, Any] = {"lo": np.zeros(0, np.uint64), "hi": np.zeros(0, np.uint64)}
    prov, check = _bounds_check(it, table)
    _track_arguments(it, table)
    _check_accesses(it, prov, check)
    _keep_provenance(it, prov)


def _bounds_check(it: Any, table: dict[str, Any]) -> tuple[Callable, Callable]:
    """(prov, check): a pointer handle's provenance (the argument index of each lane, or `none`),
    and the check of one access's active lanes against their arguments' extents (`table`)."""
    import numpy as np

    none = np.uint64(np.iinfo(np.uint64).max)

    def prov(h: Any) -> Any:
        p = getattr(h, "kbx_prov", None)
        return np.full(np.shape(h.data), none, np.uint64) if p is None else p

    def check(ptrs: Any, mask: Any, what: str) -> None:
        p = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        m = (np.ones(p.shape, bool) if mask is None
             else np.broadcast_to(np.asarray(mask.data, bool), p.shape))
        active = p[m]
        if active.size == 0:
            return
        ids = np.broadcast_to(prov(ptrs), p.shape)[m]
        if (ids >= np.uint64(table["lo"].size)).any():
            MONITOR.torch_ops.add("a kernel addressed memory through a pointer no argument handed "
                                  "it (an integer made a pointer)")
            MONITOR.denied = True
            raise IndexError(f"{what} through a pointer that no tensor argument of the kernel "
                             "handed over (an integer cast to a pointer?): kernels address only "
                             "the tensors they are given")
        size = np.uint64(it._get_np_dtype(ptrs.get_element_ty()).itemsize)
        ids = ids.astype(np.intp)
        ok = (active >= table["lo"][ids]) & (active + size <= table["hi"][ids])
        if not ok.all():
            raise IndexError(f"out-of-bounds {what}: {int((~ok).sum())} of {active.size} active "
                             "lanes address memory outside the tensor argument their pointer came "
                             "from (a missing or wrong mask?)")
    return prov, check


def _track_arguments(it: Any, table: dict[str, Any]) -> None:
    """Each launch's tensor arguments: their storages (`MONITOR.spans`) and, as each becomes a
    pointer handle, its extent in `table`, the handle's lanes tagged with its index."""
    import numpy as np

    init, cvt = it.GridExecutor._init_args_hst, it._implicit_cvt

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        spans = []
        for t in tensors((args_hst, kwargs_hst), wrapped=True):
            st = t.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        MONITOR.spans = spans
        table["lo"], table["hi"] = np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        return args_hst, kwargs_hst

    def extent(t: Any) -> tuple[int, int]:
        lo = t.data_ptr()
        if t.numel() == 0:
            return lo, lo
        reach = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        return lo, lo + (reach + 1) * t.element_size()

    def _implicit_cvt(arg: Any) -> Any:
        out = cvt(arg)
        if hasattr(arg, "data_ptr") and isinstance(getattr(out, "handle", None), it.TensorHandle):
            lo, hi = extent(it._unwrap_tensor(arg))
            k = table["lo"].size
            table["lo"] = np.append(table["lo"], np.uint64(lo))
            table["hi"] = np.append(table["hi"], np.uint64(hi))
            out.handle.kbx_prov = np.full(out.handle.data.shape, k, np.uint64)
        return out

    it.GridExecutor._init_args_hst = _init_args_hst
    it._implicit_cvt = _implicit_cvt


def _check_accesses(it: Any, prov: Callable, check: Callable) -> None:
    """Loads, stores and atomics check their active lanes first."""
    b = it.InterpreterBuilder
    load, store, rmw = b.create_masked_load, b.create_masked_store, b.create_atomic_rmw
    cas, poll = b.create_atomic_cas, b.create_atomic_poll

    def create_masked_load(self: Any, ptrs: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "load")
        return load(self, ptrs, mask, *a)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *a)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, value: Any, mask: Any, *a: Any) -> Any:
        check(ptr, mask, "atomic")
        return rmw(self, op, ptr, value, mask, *a)

    def create_atomic_cas(self: Any, ptr: Any, *a: Any) -> Any:
        check(ptr, None, "atomic")
        return cas(self, ptr, *a)

    def create_atomic_poll(self: Any, ptr: Any, *a: Any) -> Any:
        check(ptr, None, "atomic")
        tagged = it.TensorHandle(ptr.data, ptr.dtype)
        tagged.kbx_prov = prov(ptr)
        real, b.create_masked_load = b.create_masked_load, load  # its element loads: checked above
        try:
            return poll(self, tagged, *a)
        finally:
            b.create_masked_load = real

    b.create_masked_load, b.create_masked_store = create_masked_load, create_masked_store
    b.create_atomic_rmw, b.create_atomic_cas = create_atomic_rmw, create_atomic_cas
    b.create_atomic_poll = create_atomic_poll


def _int_to_ptr(self: Any, src: Any, dst_type: Any) -> Any:
    MONITOR.torch_ops.add("a kernel cast an integer to a pointer")
    MONITOR.denied = True
    raise TypeError("a kernel cast an integer to a pointer: kernels address only the tensors "
                    "they are given (issue 26, class 1)")


def _keep_provenance(it: Any, prov: Callable) -> None:
    """Pointer results of arithmetic, views, `where`, bitcasts and descriptors carry their
    operands' provenance; an integer made a pointer is refused."""
    import numpy as np
    import triton.language as tl

    b = it.InterpreterBuilder
    addptr, bitcast = b.create_addptr, b.create_bitcast

    def create_addptr(self: Any, ptr: Any, offset: Any) -> Any:
        out = addptr(self, ptr, offset)
        out.kbx_prov = np.broadcast_to(prov(ptr), np.shape(out.data))
        return out

    def create_bitcast(self: Any, src: Any, dst_type: Any) -> Any:
        out = bitcast(self, src, dst_type)
        if isinstance(out.dtype, tl.pointer_type):
            if not isinstance(src.dtype.scalar if hasattr(src.dtype, "scalar") else src.dtype,
                              tl.pointer_type):
                return _int_to_ptr(self, src, dst_type)
            out.kbx_prov = prov(src)
        return out

    for name, slots in (("create_splat", (1,)), ("create_broadcast", (0,)),
                        ("create_expand_dims", (0,)), ("create_reshape", (0,)),
                        ("create_trans", (0,)), ("create_cat", (0, 1)), ("create_join", (0, 1)),
                        ("create_split", (0,)), ("create_unsplat", (0,)),
                        ("create_select", (1, 2))):
        _keeps(it, prov, name, slots)
    b.create_addptr, b.create_bitcast = create_addptr, create_bitcast
    b.create_int_to_ptr = _int_to_ptr
    mat = it.TensorDescHandle.materialize_pointers

    def materialize_pointers(self: Any, offsets: Any) -> Any:
        ptrs, mask = mat(self, offsets)
        ptrs.kbx_prov = np.broadcast_to(prov(self.base).reshape(-1)[:1], np.shape(ptrs.data))
        return ptrs, mask

    it.TensorDescHandle.materialize_pointers = materialize_pointers


def _keeps(it: Any, prov: Callable, name: str, slots: tuple[int, ...]) -> None:
    """Wrap a builder op so that pointer results carry their operands' provenance: the op is
    run again on the provenance arrays in place of the addresses."""
    import numpy as np
    import triton.language as tl

    b = it.InterpreterBuilder
    orig = getattr(b, name)

    def op(self: Any, *args: Any) -> Any:
        out = orig(self, *args)
        outs = out if isinstance(out, tuple) else (out,)
        if not any(isinstance(getattr(o, "dtype", None), tl.pointer_type) for o in outs):
            return out
        alt = list(args)
        for i in slots:
            if i < len(alt) and isinstance(alt[i], it.TensorHandle):
                alt[i] = it.TensorHandle(np.broadcast_to(prov(alt[i]), np.shape(alt[i].data)),
                                         alt[i].dtype)
        shadow = orig(self, *alt)
        for o, s_ in zip(outs, shadow if isinstance(shadow, tuple) else (shadow,)):
            o.kbx_prov = np.asarray(s_.data, np.uint64)
        return out

    setattr(b, name, op)
