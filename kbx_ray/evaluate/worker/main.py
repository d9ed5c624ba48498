"""The sandbox worker: a child process that imports and runs untrusted candidate code.

It never sees the reference and never judges: it makes the task's inputs from a seed, calls the
candidate, and ships the outputs (as raw bytes) and its observations back to the trusted parent,
which computes the reference in its own process and compares. Started by `parent/sandbox.py` as
`python -m kbx_ray.evaluate.worker.main <response fd>`; requests arrive on stdin. Standard library,
torch, triton and numpy only, so it runs on a bare GPU image.
"""
from __future__ import annotations

import os
import sys
import traceback

from kbx_ray.evaluate.common import confine

# Run as the sandbox's child, confine this process before anything else: before torch or triton
# start threads and before any request is read (confine.py: limits, network, Landlock).
CONFINED = confine.from_env() if __name__ == "__main__" else {}

DEVICE = os.environ.get("KBX_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import torch  # noqa: E402

from kbx_ray import taskkit  # noqa: E402  (task files draw through it; watched)
from kbx_ray.evaluate import protocol, reply  # noqa: E402
from kbx_ray.evaluate.common import digest, side_stream, timing  # noqa: E402
from kbx_ray.evaluate.worker import (call_checks, candidate_errors, outputs,  # noqa: E402
                                     poison, rotation)
from kbx_ray.evaluate.worker.candidate_errors import CandidateError  # noqa: E402
from kbx_ray.evaluate.worker.handlers import Worker  # noqa: E402
from kbx_ray.evaluate.common.inputs import InputCache  # noqa: E402


# The harness modules the candidate shares this process with, watched by the sentinels (their
# globals, by identity): this module, what it split into (handlers.py, which adds its own globals
# and the Worker class; errors, outputs, call checks, poison) and what they call. The guards' own
# modules are added by `sentinels._guard_namespaces`.
_HARNESS = (globals(), vars(protocol), vars(timing), vars(side_stream), vars(digest),
            vars(sys.modules[InputCache.__module__]),
            vars(InputCache), vars(rotation), vars(rotation.Rotation), vars(taskkit),
            vars(candidate_errors), vars(outputs), vars(call_checks), vars(poison), vars(reply))


def release(worker: Worker) -> tuple[dict, list]:
    """The `release` op, after each evaluation on a GPU: drop what the last candidate left in
    this warm process (its pristine inputs, timed buffers, last outputs; the next `load` drops
    them anyway) and give the allocator's cached blocks back to the device, so the memory
    admission's ledger (gpu_memory.py) is true once the parent releases its reservation."""
    worker.inputs.clear()
    worker.timed, worker.last = {}, None
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        protocol.empty_host_cache()
    return {}, []


def _profiler() -> tuple[object, str]:
    """`KBX_WORKER_PROFILE` (a directory; the sandbox's `extra_env`, with Landlock off): each
    request's cProfile stats, summed, written there after each reply. Profiling only."""
    where = os.environ.get("KBX_WORKER_PROFILE", "")
    if not where:
        return None, ""
    import cProfile

    return cProfile.Profile(), os.path.join(where, f"worker.{os.getpid()}.prof")


def main() -> None:
    out_fp = os.fdopen(int(sys.argv[1]), "wb")
    prof, prof_path = _profiler()
    in_fp = sys.stdin.buffer
    worker = Worker(_HARNESS)
    worker.protocol_fds = (in_fp.fileno(), out_fp.fileno())
    if CONFINED.get("landlock_pending"):  # a GPU worker under landlock=on (confine.apply)
        torch.cuda.init()  # open the device nodes and load the driver while all is visible
        confine.landlock_now(CONFINED, True, DEVICE)
    worker.landlocked = bool(CONFINED.get("landlock"))
    while True:
        try:
            req, _ = protocol.recv(in_fp)
        except protocol.ProtocolError:
            return
        op = req.get("op")
        try:
            if prof:
                prof.enable()
            header, blobs = release(worker) if op == "release" else getattr(worker, op)(req)
            header["ok"] = True
        except CandidateError as e:
            header = {"ok": False, "error_kind": e.kind, "error_msg": e.msg, "fatal": e.fatal,
                      "cuda_suspect": e.cuda_suspect}
            blobs = []
        except BaseException as e:  # noqa: BLE001
            header = {"ok": False, "error_kind": "infra_error",
                      "error_msg": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
            blobs = []
        if prof:
            prof.disable()
            prof.dump_stats(prof_path)
        if op == "hello":  # what confine.py got: the parent logs it and refuses too little
            header["confinement"] = CONFINED
        protocol.send(out_fp, header, blobs)
        if DEVICE == "cuda":  # hold what is live, not the request's peak: others share the GPU
            try:
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001 - a broken context: the parent's probe finds it
                pass
        # a CUDA-looking failure: the parent probes this process's context next (`probe`) and
        # kills it if the context is broken (sandbox.Sandbox._confirm_cuda)


if __name__ == "__main__":
    main()
