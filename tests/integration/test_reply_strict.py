"""The parent reads the real worker's replies as typed records (reply.py): a reply that lost or
renamed a field on the way is a verdict that cannot be given (`infra_error`, naming the field,
retried once), never a pass of the check that field feeds."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import Evaluator
from kbx_ray.evaluate.parent.sandbox import Sandbox
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0))
    yield e
    e.close()


def _relu():
    task = get_task("activation/relu")
    task = replace(task, cases=tuple(c for c in task.cases if c["small"])[:1])
    return task, make_candidate(task.task_id, task.name, Path(task.solution_path).read_text())


@pytest.mark.parametrize("op,edit", [
    ("run", lambda r: r["results"][0].pop("aliased")),
    ("run", lambda r: r["results"][0].update(mutated="none")),
    ("run", lambda r: r["results"][0].__setitem__("launched", r["results"][0].pop("launches"))),
])
def test_a_malformed_reply_is_never_a_pass(ev, monkeypatch, op, edit):
    real = Sandbox.request

    def tampered(self, header, timeout):
        reply, blobs = real(self, header, timeout)
        if header.get("op") == op and reply.get("ok"):
            edit(reply)
        return reply, blobs

    task, cand = _relu()
    assert ev.evaluate(task, cand).exec_ok  # the honest solution passes with honest replies
    monkeypatch.setattr(Sandbox, "request", tampered)
    res = ev.evaluate(task, cand)
    assert (res.exec_ok, res.error_kind) == (False, "infra_error"), res.error_msg
    assert "malformed" in res.error_msg and "retried_infra_error" in res.flags
    assert any(f in res.error_msg for f in ("aliased", "mutated", "launched")), res.error_msg
