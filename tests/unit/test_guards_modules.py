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


def test_the_host_values_modules_and_the_recorder_are_watched_too() -> None:
    """The host-values mode, its marked numbers and the program recorder decide what a call may
    read back and what the replay runs: a candidate that rebinds one of their globals (through a
    harness frame) tampered with the runtime."""
    from kbx_ray.evaluate.worker import marked_numbers, recorder

    watch = sentinels.Sentinels()
    assert watch.changed() == []
    for m, name in ((host_values, "check_output"), (marked_numbers, "mark"),
                    (recorder, "RECORDER")):
        old = getattr(m, name)
        setattr(m, name, lambda *a, **k: None)
        try:
            assert any(c.endswith(f".{name}") for c in watch.changed()), m.__name__
        finally:
            setattr(m, name, old)
        assert watch.changed() == []
