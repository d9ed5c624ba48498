"""The sandbox worker: a child process that imports and runs untrusted candidate code.

It never sees the reference and never judges: it makes the task's inputs from a seed, calls the
candidate, and ships the outputs (as raw bytes) and its observations back to the trusted parent,
which computes the reference in its own process and compares. Started by `sandbox.py` as
`python -m kbx_ray.evaluate.worker <response fd>`; requests arrive on stdin. Standard library, torch,
triton and numpy only, so it runs on a bare GPU image.
"""
from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import sys
import time
import traceback
from typing import Any

from kbx_ray.evaluate import confine

# Run as the sandbox's child, confine this process before anything else: before torch or triton
# start threads and before any request is read (confine.py: limits, network, Landlock).
CONFINED = confine.from_env() if __name__ == "__main__" else {}

DEVICE = os.environ.get("KBX_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import torch  # noqa: E402

from kbx_ray import taskkit  # noqa: E402  (task files draw through it; watched)
from kbx_ray.evaluate import guards, protocol, rotation, timing  # noqa: E402
from kbx_ray.evaluate.inputs import InputCache  # noqa: E402

POISON_MB = 256
_tensors, _overlaps = rotation.tensors, rotation.overlaps  # one walk, one storage test


class CandidateError(Exception):
    def __init__(self, kind: str, msg: str, fatal: bool = False) -> None:
        super().__init__(msg)
        self.kind, self.msg = kind, msg
        self.fatal = fatal  # this process can no longer judge anyone: the parent must kill it


class Worker:
    def __init__(self) -> None:
        self.task: Any = None
        self.entry: Any = None
        self.mutates: tuple[str, ...] = ()
        self.sig: inspect.Signature | None = None
        guards.install_launch_counter()
        guards.install_value_readers()
        if DEVICE == "cpu":
            guards.install_bounds_checker()
            from kbx_ray.evaluate import interp_compat  # bf16, autotune, libdevice as on a GPU

            interp_compat.install()
            guards.install_interpreter_namespace()
        self.mode = guards.make_dispatch_mode()
        self.sentinels = guards.Sentinels(_HARNESS)
        self.inputs = InputCache(int(os.environ.get("KBX_INPUT_CACHE_MB", "4096")) << 20)
        self.tasks: dict[str, Any] = {}
        self.last: tuple | None = None  # (case name, args, kwargs, reused): the last run's buffers
        self.timed: dict[str, tuple] = {}  # case name -> (args, kwargs): buffers `time` used
        self.landlocked = False  # set once main() has confined the process (landlock.py)
        self.task_ids: dict[str, dict[str, int]] = {}  # identities of each task module's names
        self.task_key = ""
        self.prof: dict[str, float] = {}  # seconds per step since the last reply (profiling)

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

    def load(self, req: dict) -> tuple[dict, list[Any]]:
        self.task_key = req.get("task_key") or req["task_path"]
        if self.task_key not in self.tasks:
            mod = _import_path(f"kbx_task_{req['module']}", req["task_path"])
            self.tasks[self.task_key] = mod
            self.task_ids[self.task_key] = {k: id(v) for k, v in vars(mod).items()}
        self.task = self.tasks[self.task_key]
        guards.MONITOR.movement = guards.movement_task(self.task)  # copies there are the answer
        self.last = None
        # A new candidate never sees inputs an earlier one could have written to (cached pristine
        # tensors live in this process); drawing them again on the device costs milliseconds.
        self.inputs.clear()
        self.timed = {}
        self.mutates = tuple(getattr(self.task, "MUTATES", ()))
        self.sig = inspect.signature(getattr(self.task, req["entry"]))
        try:
            module = _import_path(f"kbx_cand_{req['module']}", req["code_path"])
        except BaseException as e:  # noqa: BLE001 - SystemExit at import is the candidate's doing
            self._check_tampering()
            raise CandidateError("import_error", _candidate_tb(e, req["code_path"])) from None
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
                raise CandidateError("runtime_error", _candidate_tb(e, req["code_path"])) from None
            self._check_tampering()
        self.entry = entry
        return {}, []

    def run(self, req: dict) -> tuple[dict, list[Any]]:
        """Each seed's outputs, encoded as soon as they exist. Every other seed of a case reuses
        the previous seed's buffers with fresh values written in (across requests), so a result
        cached by pointer, tensor identity or shape comes back stale; the first seed runs twice,
        to check determinism and that the second call did not hand back the first call's output
        buffer."""
        results: list[dict] = []
        blobs: list[Any] = []
        for i, seed in enumerate(req["seeds"]):
            args, kwargs = self._inputs(req["case"], seed)
            last, reused = self.last, False
            if (last and not (i == 0 and req.get("repeat", True)) and last[0] == req["case"]["name"]
                    and not last[3] and _refill((last[1], last[2]), (args, kwargs))):
                args, kwargs, reused = last[1], last[2], True
            self.last = (req["case"]["name"], args, kwargs, reused)
            info, returned, mutated = self._call_checked(args, kwargs)
            outs = returned + mutated
            with self._step("encode"):
                info["outputs"] = _encode(outs, blobs)
            if i == 0 and req.get("repeat", True):
                args2, kwargs2 = self._inputs(req["case"], seed)
                _, returned2, mutated2 = self._call_checked(args2, kwargs2)
                if any(_overlaps(a, b) for a in returned for b in returned2):
                    raise CandidateError("disqualified", "the second call returned the first "
                                         "call's output buffer: results are cached across calls")
                outs2 = returned2 + mutated2
                info["nondeterministic"] = len(outs) != len(outs2) or not all(
                    _same(a, b) for a, b in zip(outs, outs2))
            results.append(info)
        return {"results": results, "prof": self._take_prof()}, blobs

    def time(self, req: dict) -> tuple[dict, list[Any]]:
        """Time the candidate on one case; its buffers are kept for `recheck`, which the parent asks
        for next, outside the exclusive GPU lock (the check needs no quiet GPU). Between timed
        calls the buffers get the next input set's values (`rotation.py`); the last output of each
        set goes back, for the parent to compare."""
        seeds = [int(s) for s in req.get("seeds") or [req["seed"]]]
        args, kwargs = self._inputs(req["case"], seeds[0])
        sets = [(seeds[0], self._inputs(req["case"], seeds[0]))]
        sets += [(s, p) for s in seeds[1:] for p in [self._inputs(req["case"], s)]
                 if rotation.same_layout(p, (args, kwargs), _scalars)]
        rot = rotation.Rotation(self.entry, args, kwargs, sets, self._mutated_args,
                                lambda: guards.MONITOR.launches, int(req.get("fresh", 0)))
        side0 = guards.MONITOR.side_launches
        try:
            t = timing.bench(rot.call, timing.TimingConfig(**req["timing"]), DEVICE, rot.between)
        except CandidateError:
            raise
        except Exception as e:  # noqa: BLE001 - a timed call raised: the candidate's error
            self._check_tampering()
            raise CandidateError(_error_kind(e), _candidate_tb(e, "kbx_cand_")) from None
        # the timed calls ran unguarded: a patch made only when called often enough shows up here
        self._check_tampering()
        if guards.MONITOR.side_launches > side0:
            raise CandidateError("disqualified", f"{guards.MONITOR.side_launches - side0} timed "
                                 "launches ran on a non-default CUDA stream: their time escapes "
                                 "the timing events")
        self.timed[req["case"]["name"]] = (args, kwargs)
        blobs: list[Any] = []
        samples = [{"seed": seed, "outputs": _encode(outs, blobs)} for seed, outs in rot.samples()]
        checked = {"calls": rot.calls, "launchless": rot.launchless, "repeated": rot.repeated,
                   "error": rot.error, "samples": samples, "fresh_ms": rot.fresh_ms}
        return {"timing": t.to_dict(), "timed_check": checked}, blobs

    def _mutated_args(self, args: tuple, kwargs: dict) -> list[Any]:
        bound = self.sig.bind(*args, **kwargs).arguments if self.sig and self.mutates else {}
        return [bound[m] for m in self.mutates if m in bound]

    def recheck(self, req: dict) -> tuple[dict, list[Any]]:
        """Fresh values written into the very buffers that were just timed, then one checked call:
        a cache keyed by pointer, shape or call count now returns a stale answer, which the parent
        rejects."""
        if req["case"]["name"] not in self.timed:
            raise RuntimeError(f"recheck of case {req['case']['name']!r} without timing it first")
        args, kwargs = self.timed.pop(req["case"]["name"])
        fresh_args, fresh_kwargs = self._inputs(req["case"], req["fresh_seed"])
        if not _refill((args, kwargs), (fresh_args, fresh_kwargs)):
            # the seed decides sizes (random sequence lengths): new buffers, so a cache keyed by
            # pointer or shape misses anyway and must recompute
            args, kwargs = fresh_args, fresh_kwargs
        info, returned, mutated = self._call_checked(args, kwargs)
        blobs: list[Any] = []
        with self._step("encode"):
            info["outputs"] = _encode(returned + mutated, blobs)
        return {"check": info, "prof": self._take_prof()}, blobs

    # ---- one checked call ------------------------------------------------------------------
    def _call_checked(self, args: tuple, kwargs: dict) -> tuple[dict, list[Any], list[Any]]:
        with self._step("poison"):
            pristine = [t.clone() for t in _tensors((args, kwargs))]
            _poison(sum(t.numel() * t.element_size() for t in pristine))
        guards.MONITOR.reset((args, kwargs))
        guards.MONITOR.active = True
        side0 = guards.MONITOR.side_launches
        try:
            with self._step("call"):
                with self.mode:
                    out = self.entry(*args, **kwargs)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
        except BaseException as e:  # noqa: BLE001
            self._check_tampering()
            raise CandidateError(_error_kind(e), _candidate_tb(e, "kbx_cand_")) from None
        finally:
            guards.MONITOR.active = False
        self._check_tampering()
        returned = _flatten_output(out)
        bound = self.sig.bind(*args, **kwargs).arguments if self.sig else {}
        mutated_args = [bound[m] for m in self.mutates if m in bound]
        inputs = _tensors((args, kwargs))
        guards.MONITOR.finish(returned, mutated_args, inputs)  # only kernels write results
        info = {
            "launches": guards.MONITOR.launches,
            "torch_ops": sorted(guards.MONITOR.torch_ops),
            # an output that IS a declared-mutated argument (in-place and `out=` contracts)
            "aliased": any(_overlaps(o, t) for o in returned if not _is_one_of(o, mutated_args)
                           for t in inputs),
            "mutated": [i for i, (t, p) in enumerate(zip(inputs, pristine))
                        if not any(t is m for m in mutated_args) and not _same(t, p)],
            "structure": _structure(out),
            "side_stream_launches": guards.MONITOR.side_launches - side0,
            "stream_changed": DEVICE == "cuda"
            and torch.cuda.current_stream() != torch.cuda.default_stream(),
            "tampered": [],
        }
        return info, returned, mutated_args

    def _check_tampering(self) -> None:
        changed = self._tampered()
        if changed:
            raise CandidateError("disqualified", "the candidate patched the harness runtime ("
                                 f"{', '.join(changed)})", fatal=True)

    def _tampered(self) -> list[str]:
        """Harness, library or task-module names the candidate replaced (see guards.Sentinels)."""
        changed = self.sentinels.changed()
        ids = self.task_ids.get(self.task_key, {})
        changed += [f"task.{k}" for k, v in vars(self.task).items() if k in ids and ids[k] != id(v)]
        return changed[:5]


# ---- helpers -----------------------------------------------------------------------------------
def _import_path(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _candidate_tb(e: BaseException, marker: str) -> str:
    """The traceback from the candidate's frames on: harness frames say nothing to a model."""
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    keep = [ln for ln in lines if "kbx_ray/evaluate" not in ln and "<frozen importlib" not in ln]
    return "".join(keep[-12:])


def _error_kind(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    if "CUDA error" in text or "illegal memory access" in text or "cudaError" in text:
        return "cuda_error"
    if DEVICE == "cpu" and isinstance(e, NotImplementedError):
        return "unsupported_interpreter"
    return "runtime_error"


def _flatten_output(out: Any) -> list[Any]:
    if out is None:
        return []
    outs = ([out] if isinstance(out, torch.Tensor)
            else list(out) if isinstance(out, (list, tuple)) else None)
    if outs is None or not all(isinstance(t, torch.Tensor) for t in outs):
        raise CandidateError("runtime_error", f"the entry function returned {type(out).__name__}, "
                                              "expected a tensor, a tuple of tensors or None")
    for t in outs:
        if type(t) is not torch.Tensor:  # noqa: E721 - a subclass runs its own code when read
            raise CandidateError("disqualified", f"the entry function returned a "
                                 f"{type(t).__name__}, a torch.Tensor subclass (its values could "
                                 "be computed lazily)")
        if t.layout != torch.strided or t.device.type != DEVICE:
            raise CandidateError("runtime_error", f"an output is a {t.layout} tensor on "
                                 f"{t.device}; expected a dense tensor on {DEVICE}")
    return outs


def _structure(out: Any) -> str:
    if out is None:
        return "none"
    return "tensor" if isinstance(out, torch.Tensor) else f"tuple{len(out)}"


def _same(a: Any, b: Any) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def _is_one_of(t: Any, args: list[Any]) -> bool:
    """`t` is one of `args` itself, or a view with the very same elements."""
    return any(t is a or (t.data_ptr() == a.data_ptr() and t.dtype == a.dtype
                          and t.shape == a.shape and t.stride() == a.stride()) for a in args)


def _refill(old: tuple, new: tuple) -> bool:
    """Write `new`'s tensor values into `old`'s buffers; False when their layouts differ."""
    if not rotation.same_layout(old, new, _scalars):
        return False
    for x, y in zip(_tensors(old), _tensors(new)):
        x.copy_(y)
    return True


def _scalars(obj: Any) -> list[Any]:
    if isinstance(obj, torch.Tensor):
        return []
    if isinstance(obj, (list, tuple)):
        return [s for x in obj for s in _scalars(x)]
    if isinstance(obj, dict):
        return [(k, _scalars(v)) for k, v in sorted(obj.items())]
    return [obj]


def _poison(input_bytes: int = 0) -> None:
    """Make every block the candidate can allocate read as NaN (0xFF bytes) until it writes it.

    Freed blocks cached by the allocator hold old inputs, copies and outputs (inputs are drawn on
    the GPU here). Release the free segments; then take every remaining free block (the holes in
    segments still in use, found in the allocator's snapshot) by asking for its exact size, plus
    one big block and 64 MB of the small pool (requests up to 1 MB never come from big blocks);
    fill them all and free them, so the candidate's `empty` is carved from poison."""
    if DEVICE != "cuda":
        return
    torch.cuda.empty_cache()
    try:
        _fill_free_blocks(input_bytes)
    except torch.OutOfMemoryError:  # a nearly full GPU: poison what fitted, leave room to run
        torch.cuda.empty_cache()


def _fill_free_blocks(input_bytes: int) -> None:
    held = []
    try:
        for seg in torch.cuda.memory_snapshot():
            held += [torch.empty(blk["size"], dtype=torch.uint8, device="cuda")
                     for blk in seg.get("blocks", []) if blk.get("state") == "inactive"]
    except (RuntimeError, KeyError, TypeError):  # an allocator without snapshots: big blocks only
        pass
    held.append(torch.empty(min(max(POISON_MB << 20, 2 * input_bytes), 8 << 30),
                            dtype=torch.uint8, device="cuda"))
    held += [torch.empty((1 << 20) - 512, dtype=torch.uint8, device="cuda") for _ in range(64)]
    for t in held:
        t.fill_(0xFF)
    del held


def _encode(outs: list[Any], blobs: list[Any]) -> list[dict]:
    """Outputs to the wire; one that cannot be read as plain bytes (a conjugate or negative view,
    a storage the candidate freed) is the candidate's error, not the harness's."""
    metas = []
    for i, t in enumerate(outs):
        try:
            meta, raw = protocol.tensor_to_wire(t)
        except Exception as e:  # noqa: BLE001
            raise CandidateError("runtime_error", f"output {i} cannot be read back as plain "
                                 f"{t.dtype} values ({type(e).__name__}: {e}); return a "
                                 "materialised tensor (e.g. .resolve_conj())") from None
        metas.append(meta)
        blobs.append(raw)
    return metas


_HARNESS = (globals(), vars(protocol), vars(timing), vars(sys.modules[InputCache.__module__]),
            vars(InputCache), vars(Worker), vars(rotation), vars(rotation.Rotation), vars(taskkit))


def main() -> None:
    out_fp = os.fdopen(int(sys.argv[1]), "wb")
    in_fp = sys.stdin.buffer
    worker = Worker()
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
            header, blobs = getattr(worker, op)(req)
            header["ok"] = True
        except CandidateError as e:
            header = {"ok": False, "error_kind": e.kind, "error_msg": e.msg, "fatal": e.fatal}
            blobs = []
        except BaseException as e:  # noqa: BLE001
            header = {"ok": False, "error_kind": "infra_error",
                      "error_msg": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
            blobs = []
        if op == "hello":  # what confine.py got: the parent logs it and refuses too little
            header["confinement"] = CONFINED
        protocol.send(out_fp, header, blobs)
        if header.get("error_kind") == "cuda_error":
            os._exit(3)  # the CUDA context is poisoned: the parent respawns us


if __name__ == "__main__":
    main()
