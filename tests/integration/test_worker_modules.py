"""The worker's entry (worker/main.py) is split (handlers, call checks, outputs, poison, candidate
errors): each module the candidate shares the worker process with is watched by the sentinels, as
the entry's globals were. Runs in a child process: importing the worker sets TRITON_INTERPRET for
the process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts a child process

_CHILD = r"""
import json
from kbx_ray.evaluate.worker import call_checks, candidate_errors, handlers, outputs, poison
from kbx_ray.evaluate.worker import main as worker

w = handlers.Worker(worker._HARNESS)
assert w.sentinels.changed() == [], w.sentinels.changed()
found = {}
for mod, name in ((handlers, "observe"), (call_checks, "same"), (outputs, "encode"),
                  (poison, "poison"), (candidate_errors, "error_kind"), (worker, "main")):
    orig = getattr(mod, name)
    setattr(mod, name, lambda *a, **k: None)
    found[mod.__name__] = w.sentinels.changed()
    setattr(mod, name, orig)
handlers.Worker._call_checked, orig = (lambda *a: None), handlers.Worker._call_checked
found["Worker"] = w.sentinels.changed()
handlers.Worker._call_checked = orig
found["restored"] = w.sentinels.changed()
print(json.dumps(found))
"""


def test_every_worker_module_is_watched_by_the_sentinels() -> None:
    env = dict(os.environ, KBX_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    for mod, name in (("handlers", "observe"), ("call_checks", "same"), ("outputs", "encode"),
                      ("poison", "poison"), ("candidate_errors", "error_kind"),
                      ("main", "main")):
        changed = found[f"kbx_ray.evaluate.worker.{mod}"]
        assert any(c.endswith(f".{name}") for c in changed), (mod, changed)
    assert any(c.endswith("._call_checked") for c in found["Worker"]), found["Worker"]
    assert found["restored"] == []
