"""The worker's `trace` request: each case's launches, recorded by a forked copy of this process that
runs the candidate on meta tensors (no storage, no GPU work) with no kernel compiled or launched.
The parent has the replay process compile them and seeds this worker's Triton cache from it, so
the candidate's own call compiles nothing (one compile serves both). A hint only: nothing here is
judged, the copy's state dies with it, and whatever it missed the worker compiles as before.
"""
from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any, NoReturn

import torch

from kbx_ray.evaluate.common.trees import tensors
from kbx_ray.evaluate.worker.recorder import RECORDER

DEVICE = os.environ.get("KBX_DEVICE", "cpu")

CAP = 8 << 20  # the copy's reply, at most

# `w` is the `handlers.Worker` serving the request (not imported: it imports this module)
Worker = Any


def mirror(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """The `mirror` request, before `trace`: each case's inputs drawn here (`seed`), mirrored as
    meta tensors and dropped, one case's memory at a time. The parent holds the GPU shared for
    this draw only: the copy `trace` forks runs on the mirrors and cannot reach the GPU (CUDA does
    not survive a fork), so no other evaluator's timing waits behind it."""
    if w.entry is None:
        raise RuntimeError("mirror before load")
    w.mirrors = []
    for case in req["cases"]:
        try:
            w.mirrors.append(_meta(w.task.make_inputs(case, int(req["seed"]), DEVICE), {}))
        except Exception as e:  # noqa: BLE001 - the call's own draw says what is wrong
            w.mirrors.append(f"{type(e).__name__}: {str(e)[:200]}")
    return {"mirrored": len(w.mirrors)}, []


def trace(w: Worker, req: dict) -> tuple[dict, list[Any]]:
    """{"programs": each mirrored case's launches as a program, or {"unsupported": why}}."""
    mirrors, w.mirrors = w.mirrors, None
    if mirrors is None:
        raise RuntimeError("trace before mirror")
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the copy (coverage does not follow a fork)
        _copy(w, r, wfd, mirrors)
    os.close(wfd)
    data = _read(r, pid, float(req.get("timeout_s", 20.0)))
    try:
        got = json.loads(data) if data else None
    except ValueError:
        got = None
    if not isinstance(got, list) or len(got) != len(mirrors):
        got = [{"unsupported": "the traced copy sent no programs"}] * len(mirrors)
    return {"programs": [p if isinstance(p, dict) else {"unsupported": "not a program"}
                         for p in got]}, []


def _copy(w: Worker, r: int, wfd: int, mirrors: list[Any]) -> NoReturn:  # pragma: no cover
    """The copy's life: it holds neither of the worker's protocol pipes (a copy that outlives the
    worker must not read its requests or answer them, and the parent sees the worker's death at
    once) and ends here whatever its write or the candidate raises."""
    try:
        for fd in (r, *w.protocol_fds):
            os.close(fd)
        data = json.dumps([_traced(w.entry, m) for m in mirrors]).encode()[:CAP]
        with os.fdopen(wfd, "wb") as fp:
            fp.write(data)
    finally:
        os._exit(0)


def _read(r: int, pid: int, timeout: float) -> bytes:
    """The copy's whole reply, or b"" past `timeout` (the copy is killed)."""
    chunks, end, size = [], time.monotonic() + timeout, 0
    with os.fdopen(r, "rb", buffering=0) as fp:
        while size < CAP:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fp], [], [], left)[0]:
                chunks = []
                break
            chunk = fp.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return b"".join(chunks)


def _traced(entry: Any, mirror: Any) -> dict:
    """In the copy: the call on one case's meta inputs, each launch recorded and nothing
    compiled; an autotuned kernel's every config, since the worker's autotuning compiles them."""
    if isinstance(mirror, str):
        return {"unsupported": mirror}
    from triton.runtime.autotuner import Autotuner

    def every_config(self: Any, *a: Any, **kw: Any) -> None:
        for config in self.configs:
            self.fn.run(*a, **kw, **config.all_kwargs())

    Autotuner.run = every_config
    RECORDER.tracing = True
    args, kwargs = mirror
    try:
        with RECORDER.recording(tensors((args, kwargs))):
            entry(*args, **kwargs)
        return RECORDER.finish([])
    except BaseException as e:  # noqa: BLE001 - the candidate's host code on meta tensors
        return {"unsupported": f"{type(e).__name__}: {str(e)[:200]}"}


def _meta(obj: Any, memo: dict[int, Any]) -> Any:
    """`obj` with each tensor a meta tensor of its dtype, shape, stride and storage offset;
    tensors sharing a storage share one meta storage of its size."""
    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        base = memo.get(st._cdata)
        if base is None:
            base = memo[st._cdata] = torch.empty(st.nbytes(), dtype=torch.uint8,
                                                 device="meta").untyped_storage()
        return torch.empty(0, dtype=obj.dtype, device="meta").set_(
            base, obj.storage_offset(), obj.shape, obj.stride())
    if isinstance(obj, dict):
        return {k: _meta(v, memo) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_meta(v, memo) for v in obj]
    if isinstance(obj, tuple):
        vals = [_meta(v, memo) for v in obj]
        return type(obj)(*vals) if hasattr(obj, "_fields") else tuple(vals)
    return obj

