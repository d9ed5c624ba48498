"""The Triton interpreter's bounds checker: every load and store's active lanes against the extent
of the very argument their pointer was derived from (its provenance, kept through pointer
arithmetic, views, `where` and descriptors); a pointer no argument handed over is refused.
Installed by the worker on CPU runs (`handlers.Worker`). Standard library, torch, triton and
numpy only.
"""
from __future__ import annotations

from typing import Any, Callable

from kbx_ray.evaluate.common.trees import tensors
from kbx_ray.evaluate.worker.ledger import MONITOR


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
    refused and disqualifies (INTEGRITY.md class 1).
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
                    "they are given (INTEGRITY.md class 1)")


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
