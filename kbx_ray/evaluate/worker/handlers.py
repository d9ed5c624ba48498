"""The worker's requests (hello, load, run, probe; time and recheck in `timed_ops.py`, the replay
process's in `replay_ops.py`) -> replies: what runs the candidate.
More: kbx_ray/evaluate/worker/README.md, `handlers.py`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import sys
import time
from typing import Any

import torch

from kbx_ray.evaluate.common.inputs import InputCache
from kbx_ray.evaluate.reply import CallReport, RunReply, wire
from kbx_ray.evaluate.worker import (bounds_checker, dispatch_monitor, host_values, ledger, poison,
                                     recorder, replay_ops, rotation, sentinels, timed_ops,
                                     trace_ops, triton_hooks, value_readers)
from kbx_ray.evaluate.worker.call_checks import observe, refill, same
from kbx_ray.evaluate.worker.candidate_errors import (CandidateError, candidate_tb, cuda_suspect,
                                                      error_kind, import_path)
from kbx_ray.evaluate.worker.outputs import encode

DEVICE = os.environ.get("KBX_DEVICE", "cpu")
_tensors, _overlaps = rotation.tensors, rotation.overlaps  # one walk, one storage test


def _comparable(a: list, b: list) -> bool:
    """Two runs' outputs of one structure (count, tensor shapes and dtypes)."""
    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape
        and x.dtype == y.dtype for x, y in zip(a, b))


class Worker:
    """The worker's state across requests: the loaded task and candidate, the guards, the input
    cache and the buffers kept between a case's seeds and between `time` and `recheck`."""

    def __init__(self, harness: tuple[dict[str, Any], ...] = ()) -> None:
        self.task: Any = None
        self.entry: Any = None
        self.mutates: tuple[str, ...] = ()
        self.sig: inspect.Signature | None = None
        triton_hooks.install_launch_counter()
        value_readers.install()
        if DEVICE == "cpu":
            bounds_checker.install_bounds_checker()
            # bf16, autotune, libdevice as on a GPU
            from kbx_ray.evaluate.worker import interp_compat

            interp_compat.install()
            triton_hooks.install_interpreter_namespace()
        recorder.install_autotune_pause()
        self.mode = dispatch_monitor.make_dispatch_mode()
        self.values = host_values.make_mode()  # numbers read back: sizes only (host_values.py)
        interp = [vars(m) for m in (sys.modules.get(f"kbx_ray.evaluate.worker.{n}") for n in
                                    ("interp_compat", "interp_bf16", "interp_libdevice")) if m]
        self.sentinels = sentinels.Sentinels((*harness, vars(sys.modules[__name__]), vars(Worker),
                                              vars(timed_ops), vars(replay_ops), *interp))
        self.inputs = InputCache(int(os.environ.get("KBX_INPUT_CACHE_MB", "4096")) << 20)
        self.tasks: dict[str, Any] = {}
        self.last: tuple | None = None  # (case name, args, kwargs, reused): the last run's buffers
        self.timed: dict[str, tuple] = {}  # case name -> (args, kwargs): buffers `time` used
        self.landlocked = False  # set once main() has confined the process (landlock.py)
        self.task_ids: dict[str, dict[str, int]] = {}  # identities of each task module's names
        self.task_key = ""
        self.protocol_fds: tuple[int, ...] = ()  # its request and reply pipes (main.py)
        self.mirrors: list[Any] | None = None  # `mirror`'s meta inputs, for the next `trace`
        self.prof: dict[str, float] = {}  # seconds per step since the last reply (profiling)
        self.monitor = True  # tests only (`evaluation.monitor=off`): the design test
        self.replays: dict[str, Any] = {}  # kernel module path -> module (replay process only)

    def _inputs(self, case: dict, seed: int) -> tuple[tuple, dict]:
        with self._step("inputs"):
            return self.inputs.get(self.task, self.task_key, case, seed, DEVICE)

    @contextlib.contextmanager
    def _step(self, name: str) -> Any:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.prof[name] = self.prof.get(name, 0.0) + time.perf_counter() - t0

    def _take_prof(self) -> dict[str, float]:
        prof, self.prof = self.prof, {}
        return {k: round(v, 6) for k, v in prof.items()}  # us: an encode can take 30 us

    # ---- ops -------------------------------------------------------------------------------
    def hello(self, req: dict) -> tuple[dict, list[Any]]:
        info = {"device": DEVICE, "torch": torch.__version__, "gpu_name": "", "driver": ""}
        import triton

        info["triton"] = triton.__version__
        info["landlock"] = self.landlocked
        if DEVICE == "cuda":
            info["gpu_name"] = torch.cuda.get_device_name(0)
            info["driver"] = str(getattr(torch.version, "cuda", "") or "")
        return info, []

    def _load_task(self, req: dict) -> None:
        self.task_key = req.get("task_key") or req["task_path"]
        if self.task_key not in self.tasks:
            mod = import_path(f"kbx_task_{req['module']}", req["task_path"])
            self.tasks[self.task_key] = mod
            self.task_ids[self.task_key] = {k: id(v) for k, v in vars(mod).items()}
        self.task = self.tasks[self.task_key]

    def load(self, req: dict) -> tuple[dict, list[Any]]:
        if self.replays:
            raise RuntimeError("a replay process never loads a candidate")
        self._load_task(req)
        ledger.MONITOR.movement = ledger.movement_task(self.task)  # copies there are the answer
        self.monitor = bool(req.get("monitor", True))
        # evaluation.torch_compute=fail: refuse ops (never with the monitor off: the design test)
        ledger.MONITOR.deny = req.get("deny", True) and self.monitor
        self.last = self.mirrors = None
        # A new candidate never sees inputs an earlier one could have written to (cached pristine
        # tensors live in this process); drawing them again on the device costs milliseconds.
        self.inputs.clear()
        self.inputs.limit = int(req.get("cache_bytes") or 0) or None  # the parent's admission
        self.timed = {}
        self.timed_refusal = ""  # a watched timed call's first refusal (`_watched`)
        self.mutates = tuple(getattr(self.task, "MUTATES", ()))
        self.sig = inspect.signature(getattr(self.task, req["entry"]))
        try:
            module = import_path(f"kbx_cand_{req['module']}", req["code_path"])
        except BaseException as e:  # noqa: BLE001 - SystemExit at import is the candidate's doing
            self._check_tampering()
            raise CandidateError("import_error", candidate_tb(e, req["code_path"])) from None
        self._check_tampering()
        entry = getattr(module, req["entry"], None)
        if not callable(entry):
            raise CandidateError("missing_entry", f"the module defines no function {req['entry']!r}")
        bind = getattr(self.task, "bind_candidate", None)
        if bind is not None:  # the task builds the per-case callable (KernelBench: ModelNew(*init))
            try:
                entry = bind(entry, DEVICE)
            except BaseException as e:  # noqa: BLE001 - the candidate's constructor ran
                self._check_tampering()
                raise CandidateError("runtime_error", candidate_tb(e, req["code_path"])) from None
            self._check_tampering()
        self.entry = entry
        return {}, []

    def replay(self, req: dict) -> tuple[dict, list[Any]]:
        return replay_ops.replay(self, req)

    def replay_time(self, req: dict) -> tuple[dict, list[Any]]:
        return replay_ops.replay_time(self, req)

    def warm(self, req: dict) -> tuple[dict, list[Any]]:
        return replay_ops.warm(self, req)

    def mirror(self, req: dict) -> tuple[dict, list[Any]]:
        return trace_ops.mirror(self, req)

    def trace(self, req: dict) -> tuple[dict, list[Any]]:
        return trace_ops.trace(self, req)

    def probe(self, req: dict) -> tuple[dict, list[Any]]:
        """A tiny op and a synchronize, after a CUDA-looking failure: the parent files
        `cuda_error` only if this fails (the context is really broken), else `runtime_error`."""
        x = torch.arange(4, device=DEVICE, dtype=torch.float32)
        v = float((x * 2).sum().item())
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return {"value": v}, []

    def run(self, req: dict) -> tuple[dict, list[Any]]:
        """Each seed's outputs, encoded as soon as they exist. Every other seed of a case reuses
        the previous seed's buffers with fresh values written in (across requests), so a result
        cached by pointer, tensor identity or shape comes back stale; the first seed runs twice,
        to check determinism and that the second call did not hand back the first call's output
        buffer."""
        results: list[CallReport] = []
        blobs: list[Any] = []
        for i, seed in enumerate(req["seeds"]):
            args, kwargs = self._inputs(req["case"], seed)
            last, reused = self.last, False
            if (last and not (i == 0 and req.get("repeat", True)) and last[0] == req["case"]["name"]
                    and not last[3] and refill((last[1], last[2]), (args, kwargs))):
                args, kwargs, reused = last[1], last[2], True
            self.last = (req["case"]["name"], args, kwargs, reused)
            info, returned, mutated = self._call_checked(args, kwargs)
            outs = returned + mutated
            with self._step("encode"):
                info = dataclasses.replace(info, outputs=encode(outs, blobs))
            if i == 0 and req.get("repeat", True):
                args2, kwargs2 = self._inputs(req["case"], seed)
                _, returned2, mutated2 = self._call_checked(args2, kwargs2)
                if any(_overlaps(a, b) for a in returned for b in returned2):
                    raise CandidateError("disqualified", "the second call returned the first "
                                         "call's output buffer: results are cached across calls")
                outs2 = returned2 + mutated2
                # bitwise equal: repeatable. Otherwise the second run goes to the parent, which
                # compares it with the first at the task's tolerance (float atomics reorder sums;
                # integer outputs and exact task checks stay bitwise there): only a structural
                # difference is decided here
                differ = len(outs) != len(outs2) or not all(
                    same(a, b) for a, b in zip(outs, outs2))
                info = dataclasses.replace(info, nondeterministic=differ
                                           and not _comparable(outs, outs2))
                if differ and not info.nondeterministic:
                    with self._step("encode"):
                        info = dataclasses.replace(info, outputs2=encode(outs2, blobs))
            results.append(info)
        return wire(RunReply(results=tuple(results), prof=self._take_prof())), blobs

    def time(self, req: dict) -> tuple[dict, list[Any]]:
        return timed_ops.time(self, req)

    def recheck(self, req: dict) -> tuple[dict, list[Any]]:
        return timed_ops.recheck(self, req)

    def _mutated_args(self, args: tuple, kwargs: dict) -> list[Any]:
        bound = self.sig.bind(*args, **kwargs).arguments if self.sig and self.mutates else {}
        return [bound[m] for m in self.mutates if m in bound]

    # ---- one checked call ------------------------------------------------------------------
    def _call_checked(self, args: tuple, kwargs: dict) -> tuple[CallReport, list[Any], list[Any]]:
        with self._step("poison"):
            pristine = [t.clone() for t in _tensors((args, kwargs))]
            poison.poison(DEVICE, sum(t.numel() * t.element_size() for t in pristine))
        ledger.MONITOR.reset((args, kwargs))
        marked_args, marked_kwargs = host_values.mark_inputs(args, kwargs) if self.monitor \
            else (args, kwargs)  # floats: `input`
        host_values.begin()
        ledger.MONITOR.active = self.monitor  # off: tests only, the replay alone judges
        side0 = ledger.MONITOR.side_launches
        values = self.values if self.monitor else contextlib.nullcontext()
        try:
            with self._step("call"), recorder.RECORDER.recording(_tensors((args, kwargs))):
                with self.mode, values:
                    out = self.entry(*marked_args, **marked_kwargs)
                    if self.monitor:
                        host_values.check_output(out)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
        except BaseException as e:  # noqa: BLE001
            self._check_tampering()
            kind = "disqualified" if host_values.REFUSED else error_kind(e, DEVICE)
            msg = candidate_tb(e, "kbx_cand_")
            if ledger.MONITOR.denied and ledger.MONITOR.deny:  # an op refused at dispatch
                kind = "disqualified"  # (default deny), whatever the candidate raised after it
                msg = f"computes with torch ops {sorted(ledger.MONITOR.torch_ops)[:5]}\n{msg}"
            raise CandidateError(kind, msg, cuda_suspect=cuda_suspect(e)) from None
        finally:
            ledger.MONITOR.active = False
        self._check_tampering()
        return observe(out, args, kwargs, pristine, self.sig, self.mutates, DEVICE, side0)

    def _check_tampering(self) -> None:
        changed = self._tampered()
        if changed:
            raise CandidateError("disqualified", "the candidate patched the harness runtime ("
                                 f"{', '.join(changed)})", fatal=True)

    def _tampered(self) -> list[str]:
        """Harness, library or task-module names the candidate replaced (sentinels.Sentinels)."""
        changed = self.sentinels.changed()
        ids = self.task_ids.get(self.task_key, {})
        changed += [f"task.{k}" for k, v in vars(self.task).items() if k in ids and ids[k] != id(v)]
        return changed[:5]
