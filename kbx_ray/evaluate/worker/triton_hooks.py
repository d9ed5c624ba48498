"""Hooks on Triton's launchers and interpreter: the launch counter, the refusals of raw addresses
and the interpreter's private namespace.

Every launch is counted (a call that launched nothing is disqualified) and tells the storage
ledger which tensors a kernel was handed. Under the CPU interpreter each rewritten kernel is exec'd
in a copy of its module's globals, and every load and store is bounds-checked against the tensors
it was handed (`bounds_checker.py`). Standard library, torch, triton and (with triton's interpreter) numpy only.
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
        if RECORDER.tracing:  # a traced copy (trace_ops.py): recorded, not compiled or run
            RECORDER.resolved(RECORDER.launch(self, args, kwargs), (1,))
            return None
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
    A kernel addresses only the tensors it is handed (INTEGRITY.md class 1). The verdict is checked
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
    addresses only the tensors it is given (INTEGRITY.md class 1). Sizes, strides and seeds are far
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
