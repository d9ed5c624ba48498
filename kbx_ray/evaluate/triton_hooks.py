"""Hooks on Triton's launchers and interpreter: the launch counter, the bounds checker and the
interpreter's private namespace.

Every launch is counted (a call that launched nothing is disqualified) and tells the storage
ledger which tensors a kernel was handed. Under the CPU interpreter every load and store is also
bounds-checked against those tensors, and each rewritten kernel is exec'd in a copy of its module's
globals. Standard library, torch, triton and (with triton's interpreter) numpy only.
"""
from __future__ import annotations

from typing import Any

from kbx_ray.evaluate.host_values import launch_values
from kbx_ray.evaluate.ledger import MONITOR, tensors_of


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
        original = cls.run

        def run(self: Any, *args: Any, __orig: Any = original, **kwargs: Any) -> Any:
            args, kwargs = launch_values(args, kwargs)  # numbers read back: never kernel values
            MONITOR.launches += 1
            if on_side_stream():
                MONITOR.side_launches += 1
            try:
                return __orig(self, *args, **kwargs)
            finally:
                if MONITOR.watching():
                    MONITOR.launched(args, kwargs)

        cls.run = run



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
        for t in tensors_of((args_hst, kwargs_hst)):
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

