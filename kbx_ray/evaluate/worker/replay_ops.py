"""The replay process's requests (`warm`, `replay`, `replay_time`): a recorded program run on fresh
inputs by a worker that never loads a candidate, only the kernel module built from its source
(`static/kernels.py`). `handlers.Worker` serves them through these functions (watched with it).
"""
from __future__ import annotations

import contextlib
import os
from typing import Any

from kbx_ray.evaluate import program
from kbx_ray.evaluate.common import timing
from kbx_ray.evaluate.common.inputs import replay_inputs
from kbx_ray.evaluate.common.trees import tensors
from kbx_ray.evaluate.reply import wire
from kbx_ray.evaluate.worker import ledger, replayer
from kbx_ray.evaluate.worker.candidate_errors import (CandidateError, candidate_tb, cuda_suspect,
                                                      error_kind, import_path)
from kbx_ray.evaluate.worker.outputs import encode

DEVICE = os.environ.get("KBX_DEVICE", "cpu")

# `w` is the `handlers.Worker` serving the request (not imported: it imports this module)
Worker = Any


def _setup(w: Worker, req: dict) -> tuple[Any, list[Any], Any]:
    """The replay process's (program, fresh input tensors, kernel module) for `req`. This
    process never loads a candidate's module; only its kernel module (`static/kernels.py`)."""
    prog, kernels = _program(w, req)
    w.inputs.limit = int(req.get("cache_bytes") or 0) or None  # the parent's admission
    try:  # the task's own inputs: a failure here is never the candidate's
        args, kwargs, _ = replay_inputs(w.inputs, w.task, w.task_key, req["case"],
                                        int(req["seed"]), int(req["fresh_seed"]), DEVICE,
                                        req["entry"])
    except Exception as e:  # noqa: BLE001 - an OOM beside other evaluators, a task's own bug
        raise CandidateError("infra_error", f"{_oom(e)}the replay could not draw its fresh "
                             f"inputs ({type(e).__name__}: {str(e)[:300]}): not the "
                             "candidate's fault") from None
    return prog, tensors((args, kwargs)), kernels


def _program(w: Worker, req: dict) -> tuple[Any, Any]:
    """`req`'s program and the kernel module it launches from."""
    if w.entry is not None:
        raise RuntimeError("a worker that loaded a candidate never replays")
    w._load_task(req)
    path = req["kernels_path"]
    try:
        if path not in w.replays:
            w.replays[path] = import_path(f"kbx_kern_{req['module']}", path)
        prog = program.parse(req["program"])
    except program.ProgramError as e:
        raise CandidateError("disqualified", f"the recorded program is outside the replay's "
                             f"instruction set: {e}") from None
    except BaseException as e:  # noqa: BLE001 - the kernel module lacks a host name it used
        raise CandidateError("replay_unsupported", "the candidate's kernels do not build "
                             f"without its host code: {candidate_tb(e, 'kbx_kern_')}") from None
    return prog, w.replays[path]


def _oom(e: BaseException) -> str:
    """The parent's OOM marker (admission.is_oom: retried alone) where `e` ran out of memory."""
    text = f"{type(e).__name__}: {e}"
    return "CUDA out of memory: " if "out of memory" in text or "OutOfMemory" in text else ""


@contextlib.contextmanager
def _errors() -> Any:
    try:
        yield
    except program.ProgramError as e:
        raise CandidateError("disqualified", f"the recorded program is outside the replay's "
                             f"instruction set: {e}") from None
    except replayer.ReplayUnsupported as e:
        raise CandidateError("replay_unsupported", str(e)) from None
    except CandidateError:
        raise
    except Exception as e:  # noqa: BLE001 - its kernels failed on fresh inputs
        if _oom(e):  # the live call ran in this memory: other evaluators hold the rest
            raise CandidateError("infra_error", "CUDA out of memory in the replay of its kernel "
                                 "program, beside other evaluators: not the candidate's fault; "
                                 f"retried alone ({str(e)[:200]})") from None
        if "is not defined" in str(e):  # a kernel names host code the replay does not build
            raise CandidateError("replay_unsupported", "a kernel uses a name the kernel "
                                 f"module lacks: {candidate_tb(e, 'kbx_kern_')}") from None
        raise CandidateError(error_kind(e, DEVICE), "the replay of its kernel program on "
                             f"fresh inputs raised: {candidate_tb(e, 'kbx_kern_')}",
                             cuda_suspect=cuda_suspect(e)) from None


def replay(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """The recorded program on fresh inputs (`replayer.py`): the outputs that are judged."""
    with _errors():
        prog, inputs, kernels = _setup(w, req)
        before = replayer.compiled(kernels)
        outs = replayer.run(prog, inputs, kernels, DEVICE, ledger.movement_task(w.task))
    blobs: list[Any] = []
    return {"outputs": [wire(m) for m in encode(outs, blobs)],
            "compiles": replayer.compiled(kernels) - before}, blobs


def warm(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """The program's kernels compiled, nothing run (`replayer.warm`): on a GPU the parent asks
    with its GPU hold let go, so a compile never keeps an evaluator waiting to time. A failure
    is no verdict: the replay itself compiles again and files it."""
    if DEVICE != "cuda":  # the interpreter compiles nothing
        return {"warmed": 0}, []
    try:
        prog, kernels = _program(w, req)
        return {"warmed": replayer.warm(prog, kernels)}, []
    except Exception as e:  # noqa: BLE001 - the replay's own run reports it, with its inputs
        return {"warmed": 0, "why": f"{type(e).__name__}: {str(e)[:200]}"}, []


def replay_time(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """The recorded program timed as the candidate's calls are (a CUDA graph on a GPU):
    a live timed call faster than this did not run it (parent/replay_check.py)."""
    with _errors():
        prog, inputs, kernels = _setup(w, req)
        call = replayer.timed_call(prog, inputs, kernels, DEVICE,
                                   ledger.movement_task(w.task))
        t = timing.bench(call, timing.TimingConfig(**req["timing"]), DEVICE)
    return {"timing": t.to_dict()}, []
