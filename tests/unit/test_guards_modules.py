"""The runtime guards live in several modules of worker/: each one's frames are the harness's for
the dispatch monitor (`frames.HARNESS_FILES`), and each one's globals are watched by the
sentinels."""
from __future__ import annotations

from kbx_ray.evaluate.worker import (aten_ops, bounds_checker, copy_rules, dispatch_monitor,
                                     frames, host_values, ledger, sentinels, storages,
                                     triton_hooks, value_readers)

GUARD_MODULES = (aten_ops, dispatch_monitor, frames, ledger, copy_rules, storages, sentinels,
                 triton_hooks, bounds_checker, value_readers)


def test_the_guards_share_one_ledger() -> None:
    assert (ledger.MONITOR is dispatch_monitor.MONITOR is triton_hooks.MONITOR
            is value_readers.MONITOR is host_values.MONITOR)


def test_every_guard_module_is_a_harness_frame_and_watched() -> None:
    watched = {id(ns) for ns in sentinels._guard_namespaces()}
    for m in GUARD_MODULES:
        path = m.__file__.replace("\\", "/")
        assert path.endswith(frames.HARNESS_FILES), m.__name__
        assert id(vars(m)) in watched, m.__name__
