"""Ahead-of-time Triton compiles on a CPU-only node, for a GPU architecture it does not have.
More: kbx_ray/evaluate/worker/README.md, `aot_compile.py`.
"""
from __future__ import annotations

import json
import sys
import traceback
from typing import Any


class _Ptr:
    """A pointer argument as Triton's specializer sees it: a dtype and an address whose alignment
    is the view's byte offset (fresh CUDA allocations are 512-byte aligned)."""

    def __init__(self, t: Any) -> None:
        self.dtype = t.dtype
        self._addr = 1024 + t.storage_offset() * t.element_size()

    def data_ptr(self) -> int:
        return self._addr


class _TargetDriver:
    """The driver Triton asks for the current device and target: the GPU to compile for."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def is_active(self) -> bool:
        return True


def install(arch: int) -> None:
    """Point Triton at `arch` (e.g. 90) and make every launch a compile-only warmup."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime import autotuner, driver
    from triton.runtime.jit import JITFunction

    driver.set_active(_TargetDriver(GPUTarget("cuda", arch, 32)))
    run = JITFunction.run

    def compile_only(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kw: Any) -> Any:
        args = tuple(_Ptr(a) if isinstance(a, torch.Tensor) else a for a in args)
        kw = {k: _Ptr(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        return run(self, *args, grid=grid, warmup=True, **kw)

    def every_config(self: Any, *args: Any, **kw: Any) -> None:  # what the autotuner will try
        kw["warmup"] = True
        for config in self.configs:
            try:  # a config the compiler rejects is one the GPU's autotuner will skip too
                self.fn.run(*args, **{**kw, **config.all_kwargs()})
            except Exception:  # noqa: BLE001, S112
                continue

    JITFunction.run = compile_only
    autotuner.Autotuner.run = every_config


REAL_INPUTS_MB = 512  # a case fake tensors cannot trace is retried with real CPU inputs this small


def _call(task: Any, entry: Any, case: dict, seed: int) -> None:
    from kbx_ray.evaluate.common.inputs import fresh_copy

    # as the GPU worker calls it: a fresh copy of the inputs (offset 0, so the same alignment)
    args, kwargs = fresh_copy(task.make_inputs(case, seed, "cpu"))
    entry(*args, **kwargs)


def _bytes(task: Any, case: dict) -> float:
    try:
        return float(task.cost(case).get("bytes", float("inf")))
    except Exception:  # noqa: BLE001
        return float("inf")


def trace(req: dict) -> dict:
    """Call the entry on each case's fake inputs; per case 'ok' or why it could not be traced."""
    import torch  # noqa: F401 - imported before the candidate, as in the sandbox worker
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kbx_ray.suites.task_import import load_module

    from kbx_ray.evaluate.common import landlock

    install(int(req["arch"]))
    landlock.confine("cpu")  # after every import: the paths needed are known
    task = load_module(req["task_path"])
    cand = load_module(req["candidate_path"], prefix="kbx_aot_cand")
    entry = getattr(cand, req["entry"])
    bind = getattr(task, "bind_candidate", None)
    if bind is not None:  # as the GPU worker does: the task builds the per-case callable
        entry = bind(entry, "cpu")
    cases: dict[str, str] = {}
    seed, real_mb = int(req.get("seed", 0)), float(req.get("real_inputs_mb", REAL_INPUTS_MB))
    for case in req["cases"]:
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                _call(task, entry, case, seed)
            cases[case["name"]] = "ok"
        except Exception as e:  # noqa: BLE001 - reported, never judged
            cases[case["name"]] = f"{type(e).__name__}: {str(e)[:160]}"
        if cases[case["name"]] != "ok" and _bytes(task, case) <= real_mb * (1 << 20):
            try:  # inputs or a launcher that need values: real ones, where they are small enough
                _call(task, entry, case, seed)
                cases[case["name"]] = "ok"
            except Exception:  # noqa: BLE001, S110 - the fake run's reason stands
                pass
    import triton

    return {"cases": cases, "triton": triton.__version__}


def main() -> None:
    import os

    from kbx_ray.evaluate.common import confine

    confine.from_env()  # first thing after exec: limits and network (sandbox.spawn, confine.py)
    req = json.loads(sys.stdin.read())
    reply_fd = os.dup(1)  # the reply's own descriptor: the candidate's prints go to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        reply = trace(req)
    except BaseException as e:  # noqa: BLE001 - the candidate failed to load: nothing compiled
        reply = {"error": "".join(traceback.format_exception_only(type(e), e)).strip()[:400]}
    with os.fdopen(reply_fd, "w") as out:
        out.write(json.dumps(reply))


if __name__ == "__main__":
    main()
