"""Runtime guards inside the sandbox worker: launches, aten compute, memory bounds, tampering.

They complement the static checks: a candidate can hide a torch call from the AST, but not from
the dispatcher, the launchers or the sentinels. One module per guard:
- `aten_ops.py`: aten op names by what the op does to values (ALLOC, VIEWS, META, MOVES, READS);
- `ledger.py`: the storage ledger of one checked call (`Monitor`, the worker's `MONITOR`);
- `dispatch_monitor.py`: the TorchDispatchMode that feeds it, Triton's exempt data movement
  (`INTERNAL`) and the value readers (`tolist`, `numpy`, `apply_`, ... dispatch nothing);
- `triton_hooks.py`: the launch counter, the interpreter's bounds checker and private namespace;
- `sentinels.py`: identities of what a candidate would patch, compared after every call.
This module gathers their names, the ones the worker uses (`guards.MONITOR`, `guards.install_*`).
"""
from __future__ import annotations

from kbx_ray.evaluate.aten_ops import ALLOC, CONST_FILLS, META, MOVES, READS, VIEWS
from kbx_ray.evaluate.dispatch_monitor import INTERNAL, install_value_readers, make_dispatch_mode
from kbx_ray.evaluate.ledger import MONITOR, Monitor, movement_task
from kbx_ray.evaluate.sentinels import Sentinels
from kbx_ray.evaluate.triton_hooks import (install_bounds_checker, install_interpreter_namespace,
                                           install_launch_counter)

__all__ = [
    "ALLOC", "CONST_FILLS", "INTERNAL", "META", "MONITOR", "MOVES", "READS", "VIEWS", "Monitor",
    "Sentinels", "install_bounds_checker", "install_interpreter_namespace",
    "install_launch_counter", "install_value_readers", "make_dispatch_mode", "movement_task",
]
