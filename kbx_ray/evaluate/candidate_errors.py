"""A failure in the candidate's code -> the error kind and traceback the parent reports.

The worker imports and calls the candidate in its own process; what goes wrong there is the
candidate's, told to the model without the harness's frames. Standard library only (the worker
imports it; its globals are watched by the sentinels through `worker._HARNESS`).
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from typing import Any


class CandidateError(Exception):
    def __init__(self, kind: str, msg: str, fatal: bool = False) -> None:
        super().__init__(msg)
        self.kind, self.msg = kind, msg
        self.fatal = fatal  # this process can no longer judge anyone: the parent must kill it


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


def error_kind(e: BaseException, device: str) -> str:
    text = f"{type(e).__name__}: {e}"
    if "CUDA error" in text or "illegal memory access" in text or "cudaError" in text:
        return "cuda_error"
    if device == "cpu" and isinstance(e, NotImplementedError):
        return "unsupported_interpreter"
    return "runtime_error"
