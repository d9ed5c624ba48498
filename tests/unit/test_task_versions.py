"""A task's version (`Task.task_hash`) covers its file and kbx_ray/taskkit.py byte for byte, and a
sweep folder resumes only cells of the same version: a move or rewrite that touches a task file
or taskkit.py (a regroup of kbx_ray/, say) would start every sweep over. These versions were
computed on the tree before the top-level regroup and must not change unless a task truly does."""
from __future__ import annotations

from kbx_ray.suites.builtin import load_suite

PINNED = {  # task id -> its task_hash as released
    "activation/relu": "5e993ecf3fec0910",
    "fusion/attention": "66347dc4a36679af",
    "math/add": "6cae130e7edd6799",
}


def test_task_versions_are_those_released() -> None:
    tasks = load_suite(include=sorted(PINNED))
    assert {t.task_id: t.task_hash for t in tasks} == PINNED

