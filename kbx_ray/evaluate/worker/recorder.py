"""One checked call -> the kernel program it ran (`program.py`), for the replay to judge.
More: kbx_ray/evaluate/worker/README.md, `recorder.py`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from kbx_ray.evaluate import program as prog

SNAPSHOT_BYTES = 4096  # a buffer of unknown origin up to this size is carried by value
_FILLS = {"zeros": 0, "zeros_like": 0, "new_zeros": 0, "ones": 1, "ones_like": 1, "new_ones": 1}
_FULL_ARG = {"full": 1, "full_like": 1, "new_full": 2, "scalar_tensor": 0, "fill_": 1}
_COPIES = frozenset({"clone", "_to_copy"})


class Unsupported(Exception):
    """The call did something the replay cannot express (the verdict then cannot be given)."""


class Recorder:
    def __init__(self) -> None:
        self.active = False
        self.paused = 0
        self._busy = False
        self.tracing = False  # a traced copy (trace_ops.py): launches recorded, none run
        self.reset([])

    def reset(self, inputs: list[Any]) -> None:
        self.buffers: list[dict] = []
        self.steps: list[dict] = []
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []  # storages seen this call: no address is reused under us
        self.written: set[int] = set()
        self.problem = ""
        self.snapshots = 0
        for i, t in enumerate(inputs):
            st = t.untyped_storage()
            if st._cdata not in self.ids:
                self._new(st, {"kind": "input", "index": i, "nbytes": st.nbytes()})

    @contextlib.contextmanager
    def recording(self, inputs: list[Any]) -> Iterator[None]:
        self.reset(inputs)
        self.active = True
        try:
            yield
        finally:
            self.active = False

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Autotune's benchmarking: its trial launches and restores are not the program."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    def on(self) -> bool:
        return self.active and not self.paused and not self._busy

    # ---- buffers ---------------------------------------------------------------------------
    def _new(self, st: Any, desc: dict) -> int:
        self.ids[st._cdata] = len(self.buffers)
        self.buffers.append(desc)
        self.keep.append(st)
        return self.ids[st._cdata]

    def ref(self, t: Any, read: bool = False) -> dict:
        """`t` as (buffer, byte offset, shape, stride, dtype); a buffer first met here holds
        what no recorded step made: carried by value when small and `read`, else poison."""
        name = str(t.dtype).replace("torch.", "")
        if name not in prog.DTYPES:
            raise Unsupported(f"a tensor of dtype {name}")
        st = t.untyped_storage()
        b = self.ids.get(st._cdata)
        if b is None:
            b = self._new(st, {"kind": "alloc", "nbytes": st.nbytes()})
            if read and st.nbytes() <= SNAPSHOT_BYTES and not t.is_complex() and not self.tracing:
                self._snapshot(b, st, t.dtype)
        return {"buf": b, "offset": t.storage_offset() * t.element_size(),
                "shape": list(t.shape), "stride": list(t.stride()), "dtype": name}

    def _snapshot(self, b: int, st: Any, dtype: Any) -> None:
        n = st.nbytes() // dtype.itemsize
        if n == 0 or self.snapshots + n > prog.MAX_CONST:
            return
        whole = torch.empty(0, dtype=dtype, device=st.device).set_(st, 0, (n,), (1,))
        self.snapshots += n
        self.steps.append({"op": "const", "values": whole.cpu().tolist(), "dst": {
            "buf": b, "offset": 0, "shape": [n], "stride": [1],
            "dtype": str(dtype).replace("torch.", "")}})

    # ---- events ----------------------------------------------------------------------------
    def op(self, func: Any, args: Any, kwargs: Any, out: Any, internal: bool) -> None:
        """One aten op: allocations, constant fills, copies and pads are steps; Triton's and the
        harness's own data movement (`internal`) counts only for fills (autotune's reset)."""
        if not self.on() or self.problem:
            return
        full = str(getattr(func, "__name__", func))
        name = full.split(".")[0]
        kwargs = kwargs or {}
        self._busy = True
        try:
            if name in ("zero_", "fill_"):
                self._fill(args[0], 0 if name == "zero_" else args[1])
            elif internal:
                return
            elif name.startswith(("empty", "new_empty")) or name in _FILLS or name in _FULL_ARG:
                if isinstance(out, torch.Tensor):
                    self._alloc(out)
                    if name in _FILLS:
                        self._fill(out, _FILLS[name])
                    elif name in _FULL_ARG:
                        self._fill(out, args[_FULL_ARG[name]])
            elif name == "copy_":
                self._copy(args[0], args[1])
            elif name in _COPIES and isinstance(out, torch.Tensor):
                self._alloc(out)
                self._copy(out, args[0])
            elif name == "constant_pad_nd" and isinstance(out, torch.Tensor):
                self._alloc(out)
                value = args[2] if len(args) > 2 else kwargs.get("value", 0)
                self.steps.append({"op": "pad", "dst": self.ref(out), "src": self.ref(args[0], True),
                                   "pad": [int(p) for p in args[1]], "value": _number(value)})
        except Unsupported as e:
            self.problem = str(e)
        finally:
            self._busy = False

    def _alloc(self, t: Any) -> None:
        st = t.untyped_storage()
        self.ids.pop(st._cdata, None)  # a fresh storage at a reused address: a new buffer
        self._new(st, {"kind": "alloc", "nbytes": st.nbytes()})

    def _fill(self, t: Any, value: Any) -> None:
        if isinstance(t, torch.Tensor) and t.numel():
            self.steps.append({"op": "fill", "dst": self.ref(t), "value": _number(value)})

    def _copy(self, dst: Any, src: Any) -> None:
        if not isinstance(src, torch.Tensor):
            raise Unsupported(f"a copy from a {type(src).__name__}")
        if dst.numel():
            self.steps.append({"op": "copy", "dst": self.ref(dst), "src": self.ref(src, True)})

    def launch(self, fn: Any, args: tuple, kwargs: dict) -> dict | None:
        """The step for one launch (its grid is filled in by `resolved` once Triton resolved
        it); None when not recording."""
        if not self.on() or self.problem:
            return None
        self._busy = True
        try:
            inner = getattr(fn, "fn", fn)
            if not str(getattr(inner, "__module__", "")).startswith("kbx_cand_"):
                raise Unsupported("a launch of a kernel from outside the candidate's module")
            step = {"op": "launch", "kernel": inner.__name__, "grid": [],
                    "args": [self._arg(a) for a in args],
                    "kwargs": {k: self._arg(v) for k, v in kwargs.items()
                               if k not in ("grid", "warmup")}}
        except Unsupported as e:
            self.problem = str(e)
            return None
        finally:
            self._busy = False
        self.steps.append(step)
        return step

    def resolved(self, step: dict | None, grid: Any) -> None:
        if step is None:
            return
        try:
            step["grid"] = [int(g) for g in tuple(grid)]
        except (TypeError, ValueError):
            self.problem = f"a grid of {type(grid).__name__}"

    def _arg(self, a: Any, depth: int = 0) -> dict:
        import triton.language as tl

        if isinstance(a, torch.Tensor):
            return {"t": self.ref(a, True)}
        if isinstance(a, tl.constexpr):
            a = a.value
        if a is None or isinstance(a, (bool, int, float, str)):
            return {"v": _number(a) if isinstance(a, (int, float)) else a}
        if isinstance(a, tl.dtype):
            return {"tl": a.name}
        if isinstance(a, torch.dtype):
            return {"torch": str(a).replace("torch.", "")}
        if isinstance(a, (tuple, list)) and depth < 4:
            return {"seq": [self._arg(x, depth + 1) for x in a]}
        raise Unsupported(f"a launch argument of type {type(a).__name__}")

    def finish(self, outputs: list[Any]) -> dict:
        """The program's wire form, or {"unsupported": why}."""
        if self.problem:
            return {"unsupported": self.problem}
        try:
            outs = [self.ref(t) for t in outputs]
        except Unsupported as e:
            return {"unsupported": str(e)}
        return prog.Program(self.buffers, self.steps, outs).to_wire()


def _number(v: Any) -> Any:
    """A plain Python number (a marked host value loses its mark: it is a constant now)."""
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_complex():
        return v.item()
    raise Unsupported(f"a fill value of type {type(v).__name__}")


RECORDER = Recorder()


def install_autotune_pause() -> None:
    """Autotune's trial runs of each config are benchmarking, not the program: pause there."""
    from triton.runtime.autotuner import Autotuner

    bench = Autotuner._bench

    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        with RECORDER.pause():
            return bench(self, *args, **kwargs)

    Autotuner._bench = _bench
