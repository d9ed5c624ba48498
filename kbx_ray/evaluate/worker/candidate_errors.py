"""A failure in the candidate's code -> the error kind and traceback the parent reports.

The worker imports and calls the candidate in its own process; what goes wrong there is the
candidate's, told to the model without the harness's frames. Standard library only (the worker
imports it; its globals are watched by the sentinels through `main._HARNESS`).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from typing import Any


class CandidateError(Exception):
    def __init__(self, kind: str, msg: str, fatal: bool = False, cuda_suspect: bool = False) -> None:
        super().__init__(msg)
        self.kind, self.msg = kind, msg
        self.fatal = fatal  # this process can no longer judge anyone: the parent must kill it
        self.cuda_suspect = cuda_suspect  # CUDA-looking text: the parent probes the context


def import_path(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def candidate_tb(e: BaseException, marker: str) -> str:
    """The traceback from the candidate's frames on: harness frames say nothing to a model."""
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    keep = [ln for ln in lines if "kbx_ray/evaluate" not in ln and "<frozen importlib" not in ln]
    return "".join(keep[-12:])


_CUDA_TEXT = ("CUDA error", "illegal memory access", "cudaError", "CUDA out of memory",
              "device-side assert")


def _chain(e: BaseException) -> list[BaseException]:
    """`e`, then what it was raised from or while handling (`from None` hides the context from
    the printed traceback, not from us), innermost last; each exception once."""
    out: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and all(cur is not x for x in out) and len(out) < 32:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


# The interpreter's compatibility layer (interp_compat.py, its bf16 part and the libdevice table
# it dispatches to)
_COMPAT = ("kbx_ray.evaluate.worker.interp_compat", "kbx_ray.evaluate.worker.interp_bf16",
           "kbx_ray.evaluate.worker.interp_libdevice")


def _interpreter_files() -> tuple[str, ...]:
    """The real files of the Triton interpreter, triton.language and interp_compat (CPU mode)."""
    roots = []
    for name in ("triton.runtime.interpreter", "triton.language", *_COMPAT):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None) if mod is not None else None
        if f:
            f = os.path.realpath(f)
            roots.append(os.path.dirname(f) + os.sep if name == "triton.language" else f)
    return tuple(roots)


def frame_origin(frame: Any) -> str:
    """"candidate" (a frame of the candidate's module), "interpreter" (a frame of the real
    interpreter, triton.language or interp_compat: its file is theirs and its globals are their
    module's own dict, so a candidate that names its module `triton.language.x` or compiles code
    under their file name stays the candidate) or "other" (torch, the harness, the library)."""
    g = frame.f_globals
    name = g.get("__name__") if isinstance(g, dict) else None
    mod = sys.modules.get(name) if isinstance(name, str) else None
    own = mod is not None and getattr(mod, "__dict__", None) is g
    if isinstance(name, str) and name.startswith("kbx_cand_"):
        return "candidate"
    if own and isinstance(name, str) and (name == "triton.runtime.interpreter"
                                          or name.startswith("triton.language")
                                          or name in _COMPAT):
        f = os.path.realpath(frame.f_code.co_filename)
        if any(f == r or (r.endswith(os.sep) and f.startswith(r)) for r in _interpreter_files()):
            return "interpreter"
    if not own:  # globals of no imported module: code the candidate built (exec, types.FunctionType)
        return "candidate"
    return "other"


def raise_origin(e: BaseException) -> str:
    """Where `e` was raised: the innermost frame of its traceback (`raise` records the frame
    it ran in; a bare re-raise keeps the original frames, so the first raiser stays innermost)."""
    tb = e.__traceback__
    if tb is None:
        return "other"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return frame_origin(tb.tb_frame)


def error_kind(e: BaseException, device: str) -> str:
    """The kind by origin, never by the exception's type or text alone (INTEGRITY.md class 7).

    An exception any link of whose chain (`e`, its cause, its context, ...) was raised in the
    candidate's frames is the candidate's `runtime_error`: its own `raise`, an exception it builds
    and raises or re-raises with another message, a raise in a `@triton.jit` body (the
    interpreter runs it as the candidate's code, then wraps it). `unsupported_interpreter` only on
    the CPU, for a NotImplementedError every link of which was raised in the interpreter's own
    frames (interp_compat's re-raise of one included). A CUDA fault is not decided here: a
    CUDA-looking text only sets `cuda_suspect`, and the parent probes the worker's context
    (`sandbox.Sandbox._confirm_cuda`)."""
    chain = _chain(e)
    origins = [raise_origin(x) for x in chain]
    if "candidate" in origins:
        return "runtime_error"
    if device == "cpu" and isinstance(e, NotImplementedError) and all(
            o == "interpreter" for o in origins):
        return "unsupported_interpreter"
    return "runtime_error"


def cuda_suspect(e: BaseException) -> bool:
    """Text that looks like a CUDA fault anywhere in the chain: the parent then probes whether
    the worker's CUDA context is really broken (only then is it `cuda_error`)."""
    return any(any(t in f"{type(x).__name__}: {x}" for t in _CUDA_TEXT) for x in _chain(e))
