"""A Python frame -> whose it is: Triton's own data movement or the harness's (exempt from the
runtime guards), or the candidate's (watched).

The dispatch monitor (`dispatch_monitor.py`) and the host-values mode (`host_values.py`) ask the
same question of the frame that dispatched an op, so the answer lives here, below both. Standard
library and torch only (the worker imports it).
"""
from __future__ import annotations

import os
from typing import Any

_TORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__import__("torch").__file__)))
# Triton's own data movement, by code object (file suffix, function): the interpreter's copies to
# and from the host, autotune's reset_to_zero/restore_value and its benchmark buffers. Candidate
# callables that Triton calls (grids, hooks, heuristics, prune/perf models) run in frames of their
# own and stay monitored; so does the kernel body under the interpreter.
INTERNAL = frozenset({
    ("triton/runtime/interpreter.py", "_to_cpu"), ("triton/runtime/interpreter.py", "_from_cpu"),
    ("triton/runtime/interpreter.py", "_init_args_hst"),
    ("triton/runtime/interpreter.py", "_restore_args_dev"),
    ("triton/runtime/autotuner.py", "_pre_hook"), ("triton/runtime/autotuner.py", "_post_hook"),
    ("triton/testing.py", "do_bench"),
})
# The frames of the runtime guards and of the interpreter's compatibility layer: the ops they
# dispatch are the harness's.
HARNESS_FILES = tuple(f"kbx_ray/evaluate/worker/{m}.py" for m in (
    "aten_ops", "ledger", "copy_rules", "storages", "frames", "dispatch_monitor", "value_readers",
    "triton_hooks", "bounds_checker", "sentinels", "interp_compat", "interp_bf16",
    "interp_libdevice", "recorder", "replayer"))
# The value readers' wrappers and the host-values mode: skipped to find whose read it is.
READER_FILES = tuple(f"kbx_ray/evaluate/worker/{m}.py" for m in ("value_readers", "host_values"))


def internal(frame: Any) -> bool:
    """True when the innermost frame outside torch's own Python is Triton's or the harness's data
    movement: such ops are not the candidate's."""
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR + "/torch/")
                                 or frame.f_code.co_filename.endswith(READER_FILES[1])):
        frame = frame.f_back  # torch's own Python, and the host-values mode that called it
    if frame is None:
        return False
    code = frame.f_code
    path = code.co_filename.replace(os.sep, "/")
    if path.endswith(HARNESS_FILES):
        return True
    return any(path.endswith(f) and code.co_name == n for f, n in INTERNAL)


_TRIAL = ("triton/runtime/autotuner.py", "kernel_call")  # the autotuner's benchmark of one config


def trial(frame: Any) -> bool:
    """True when `frame` runs inside the autotuner's benchmark of a config (`_bench`'s
    `kernel_call`): a trial launch whose results the autotuner throws away before its real one."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == _TRIAL[1] and code.co_filename.replace(os.sep, "/").endswith(_TRIAL[0]):
            return True
        frame = frame.f_back
    return False
