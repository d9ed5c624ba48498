"""A recorded kernel program (`program.py`) run on fresh inputs -> the outputs that are judged.
More: kbx_ray/evaluate/worker/README.md, `replayer.py`.
"""
from __future__ import annotations

from typing import Any

import torch

from kbx_ray.evaluate.program import Program, ProgramError


class ReplayUnsupported(Exception):
    """The program cannot be run here for a reason that is not the candidate's fault."""


def _dtype(name: str) -> Any:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ProgramError(f"unknown dtype {name!r}")
    return dt


def _castable(src: Any, dst: Any) -> bool:
    """A copy that moves values without computing: same dtype, between float types, or an exact
    widening (bool/int into a wider int or a float). Truncating or wrapping casts compute."""
    if src == dst or src == torch.bool:
        return True
    if src.is_complex or dst.is_complex:
        return False
    if src.is_floating_point:
        return dst.is_floating_point
    if dst.is_floating_point:
        return True
    return dst.itemsize >= src.itemsize and (dst != torch.uint8 or src == torch.uint8)


class Machine:
    """The buffers of one replay and the steps that act on them."""

    def __init__(self, prog: Program, inputs: list[Any], device: str, movement: bool) -> None:
        self.device, self.inputs, self.movement = device, inputs, movement
        self.base: list[Any] = []
        for b in prog.buffers:
            if b["kind"] == "input":
                if b["index"] >= len(inputs):
                    raise ProgramError(f"input {b['index']} does not exist")
                st = inputs[b["index"]].untyped_storage()
                if st.nbytes() != b["nbytes"]:
                    raise ReplayUnsupported(
                        f"input {b['index']} has {st.nbytes()} bytes on fresh values and "
                        f"{b['nbytes']} when recorded: its size depends on its values (the task "
                        "should declare it STRUCTURE)")
                self.base.append(st)
            else:
                raw = torch.full((b["nbytes"],), 255, dtype=torch.uint8, device=device)
                self.base.append(raw.untyped_storage())

    def view(self, r: dict) -> Any:
        dt = _dtype(r["dtype"])
        st = self.base[r["buf"]]
        if r["offset"] % dt.itemsize:
            raise ProgramError("a reference's offset is not aligned to its dtype")
        if all(r["shape"]):
            reach = sum((n - 1) * s for n, s in zip(r["shape"], r["stride"])) + 1
            if r["offset"] + reach * dt.itemsize > st.nbytes():
                raise ProgramError(f"a reference reaches past its buffer {r['buf']}")
        return torch.empty(0, dtype=dt, device=self.device).set_(
            st, r["offset"] // dt.itemsize, r["shape"], r["stride"])

    def fill(self, s: dict) -> None:
        self.view(s["dst"]).fill_(s["value"])

    def copy(self, s: dict) -> None:
        dst, src = self.view(s["dst"]), self.view(s["src"])
        if not _castable(src.dtype, dst.dtype):
            raise ProgramError(f"a copy from {src.dtype} to {dst.dtype} computes (it truncates or "
                               "wraps values)")
        if self.movement and not (dst.is_contiguous() and dst.shape == src.shape
                                  and _lossless(src.dtype, dst.dtype)
                                  and any(_same(src, x) for x in self.inputs)):
            raise ProgramError("a torch copy other than a whole input into a plain contiguous "
                               "buffer on a data-movement task: the copy is the answer")
        dst.copy_(src)

    def pad(self, s: dict) -> None:
        if self.movement:
            raise ProgramError("a torch pad on a data-movement task: the pad is the answer")
        dst, src = self.view(s["dst"]), self.view(s["src"])
        out = torch.nn.functional.pad(src, s["pad"], value=s["value"])
        if out.shape != dst.shape or out.dtype != dst.dtype:
            raise ProgramError("a pad step's result does not fit its destination")
        dst.copy_(out)

    def const(self, s: dict) -> None:
        dst = self.view(s["dst"])
        if dst.numel() != len(s["values"]):
            raise ProgramError("a constant buffer's values do not fit its destination")
        dst.copy_(torch.tensor(s["values"], dtype=dst.dtype).reshape(dst.shape))

    def arg(self, a: dict) -> Any:
        (k, v), = a.items()
        if k == "t":
            return self.view(v)
        if k == "v":
            return v
        if k == "seq":
            return tuple(self.arg(x) for x in v)
        if k == "torch":
            return _dtype(v)
        import triton.language as tl

        try:
            return tl.dtype(v)
        except Exception as e:  # noqa: BLE001 - an unknown name from an untrusted recording
            raise ProgramError(f"unknown Triton dtype {v!r}") from e


def _lossless(src: Any, dst: Any) -> bool:
    """Every value of `src` survives in `dst` (a mask as int32 to count it: STRUCTURE sizing)."""
    if src == dst or src == torch.bool:
        return True
    if src.is_floating_point or dst.is_floating_point:
        return src.is_floating_point and dst.is_floating_point and dst.itemsize > src.itemsize
    return _castable(src, dst)


def _same(a: Any, b: Any) -> bool:
    """`a` is `b` as the call received it: the same memory, layout and dtype."""
    return (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.dtype == b.dtype
            and a.storage_offset() == b.storage_offset() and a.shape == b.shape
            and a.stride() == b.stride())


def _kernel(kernels: Any, name: str) -> Any:
    from triton.runtime.jit import JITFunction

    kinds: tuple = (JITFunction,)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        kinds += (InterpretedFunction,)
    except ImportError:  # pragma: no cover
        pass
    fn = vars(kernels).get(name)
    if not isinstance(fn, kinds):
        raise ReplayUnsupported(f"the program launches {name!r}, which is not a module-level "
                                "@triton.jit function of the candidate's source")
    return fn


def execute(m: Machine, prog: Program, kernels: Any) -> None:
    """Every step of `prog`, in order, on `m`'s buffers."""
    for s in prog.steps:
        op = s["op"]
        if op == "launch":
            fn = _kernel(kernels, s["kernel"])
            args = [m.arg(a) for a in s["args"]]
            kwargs = {k: m.arg(a) for k, a in s["kwargs"].items()}
            fn.run(*args, grid=tuple(s["grid"]), warmup=False, **kwargs)
        else:
            getattr(m, op)(s)


def compiled(kernels: Any) -> int:
    """Kernels compiled so far in this process from `kernels`' @triton.jit functions (Triton's
    per-device caches; 0 where it keeps none, as the interpreter): profiling only."""
    n = 0
    for fn in vars(kernels).values():
        for caches in (getattr(fn, "device_caches", None) or {}).values():
            try:
                n += len(caches[0])
            except (TypeError, IndexError, KeyError):
                pass
    return n


def warm(prog: Program, kernels: Any) -> int:
    """Compile `prog`'s kernels (Triton's `warmup`: nothing launched, no GPU work) on host
    buffers of the recorded sizes: a pointer's specialization is its dtype and its address's
    alignment, which a view at the same offset into any 16-byte-aligned storage shares. The
    replay's own run then finds them compiled, their launchers built (`launcher`). Returns the
    launches warmed."""
    base = [torch.empty(int(b["nbytes"]), dtype=torch.uint8).untyped_storage()
            for b in prog.buffers]
    m = Machine.__new__(Machine)
    m.device, m.inputs, m.movement, m.base = "cpu", [], False, base
    n, failed = 0, None
    for s in prog.steps:
        if s["op"] == "launch":
            try:  # one that fails is compiled again, and filed, by the replay itself
                fn = _kernel(kernels, s["kernel"])
                args = [m.arg(a) for a in s["args"]]
                kwargs = {k: m.arg(a) for k, a in s["kwargs"].items()}
                launcher(fn.run(*args, grid=tuple(s["grid"]), warmup=True, **kwargs))
                n += 1
            except Exception as e:  # noqa: BLE001 - the rest still compile
                failed = failed or e
    if failed is not None and not n:
        raise failed
    return n


def launcher(compiled: Any) -> None:
    """The compiled kernel's launcher built now: a small C module Triton compiles with the host
    compiler (0.3 s each on an H100 host) at a kernel's first launch, cached beside its binary.
    Built here, off the GPU hold, it is in the cache the worker is seeded from, so neither the
    worker's first call nor this process's first replay compiles it."""
    from triton.runtime.driver import driver

    if getattr(compiled, "module", True) is None and hasattr(compiled, "src"):  # not loaded yet
        try:
            driver.active.launcher_cls(compiled.src, compiled.metadata)
        except Exception:  # noqa: BLE001 - its first launch builds it, and reports what fails
            pass


def run(prog: Program, inputs: list[Any], kernels: Any, device: str,
        movement: bool = False) -> list[Any]:
    """Execute `prog` with `inputs` (the fresh input tensors, in `trees.tensors` order); the
    outputs it names, as fresh tensors. `movement`: the task only moves data (ledger)."""
    m = Machine(prog, inputs, device, movement)
    execute(m, prog, kernels)
    if device == "cuda":
        torch.cuda.synchronize()
    return [m.view(r).clone() for r in prog.outputs]


def timed_call(prog: Program, inputs: list[Any], kernels: Any, device: str,
               movement: bool = False) -> Any:
    """A callable that runs the program's steps once on buffers made once (run first here, so
    compiles are done): on a GPU the steps captured in one CUDA graph, so what is timed is the
    candidate's kernels and the replay's own fills and copies, with no host code at all."""
    m = Machine(prog, inputs, device, movement)
    execute(m, prog, kernels)
    if device != "cuda":
        return lambda: execute(m, prog, kernels)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        execute(m, prog, kernels)
    return graph.replay
