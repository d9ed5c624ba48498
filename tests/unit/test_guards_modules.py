"""The runtime guards live in several modules (guards.py re-exports them): each one's frames are
the harness's for the dispatch monitor, and each one's globals are watched by the sentinels, as
guards.py's were when it held them all."""
from __future__ import annotations

import sys

from kbx_ray.evaluate import dispatch_monitor, guards, ledger, sentinels, triton_hooks

GUARD_MODULES = sorted({sys.modules[getattr(guards, n).__module__] for n in guards.__all__
                        if hasattr(getattr(guards, n), "__module__")} | {
    sys.modules["kbx_ray.evaluate.aten_ops"]}, key=lambda m: m.__name__)


def test_guards_reexports_the_very_objects_the_worker_uses() -> None:
    assert guards.MONITOR is ledger.MONITOR is dispatch_monitor.MONITOR is triton_hooks.MONITOR
    assert guards.Sentinels is sentinels.Sentinels
    assert {m.__name__.rsplit(".", 1)[1] for m in GUARD_MODULES} == {
        "aten_ops", "dispatch_monitor", "ledger", "sentinels", "triton_hooks"}


def test_every_guard_module_is_a_harness_frame_and_watched() -> None:
    watched = {id(ns) for ns in sentinels._guard_namespaces()}
    for m in (*GUARD_MODULES, guards):
        path = m.__file__.replace("\\", "/")
        assert path.endswith(dispatch_monitor._HARNESS_FILES), m.__name__
        assert id(vars(m)) in watched, m.__name__
