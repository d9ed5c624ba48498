"""The honest corpus (tests/fixtures/honest/) on the CPU evaluator: no false verdicts in CPU mode.

Every file is a kernel that is correct on a GPU, written with a construct the Triton interpreter
mishandled (bf16 arithmetic, autotune, libdevice, tensor descriptors, ...). Each must be judged
exec_ok, or stop at a case filed `unsupported_interpreter` with a reason; never mismatch,
runtime_error or disqualified. The real evaluator, static checks and sandboxed worker judge them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES, make_candidate

HONEST = FIXTURES / "honest"


@dataclass(frozen=True)
class Honest:
    name: str
    code: str
    task_id: str


def load_honest() -> list[Honest]:
    out = []
    for path in sorted(HONEST.glob("*.py")):
        code = path.read_text()
        m = re.search(r"^task: *(\S+)", code, re.M)
        assert m, f"{path.name} has no 'task: <category>/<name>' line"
        out.append(Honest(path.stem, code, m.group(1)))
    return out


CORPUS = load_honest()


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=120, load_timeout_s=120))
    yield e
    e.close()


def test_corpus_is_broad():
    """At least 25 kernels over at least 12 tasks, covering the constructs the issue names."""
    assert len(CORPUS) >= 25
    assert len({h.task_id for h in CORPUS}) >= 12
    text = "\n".join(h.code for h in CORPUS)
    for construct in ("@triton.autotune", "prune_configs_by", "@triton.heuristics", "libdevice",
                      "tl.make_block_ptr", "tl.advance", "tl.dot", "acc=",
                      "input_precision", "tl.cumsum", "tl.reduce", "tl.int64", "other=",
                      "bfloat16", "lambda meta"):
        assert construct in text, f"no honest kernel uses {construct}"


@pytest.mark.parametrize("h", CORPUS, ids=[h.name for h in CORPUS])
def test_honest_kernel_is_never_falsely_rejected(ev, h):
    task = get_task(h.task_id)
    res = ev.evaluate(task, make_candidate(h.task_id, task.name, h.code))
    if res.exec_ok:
        assert all(c.ok for c in res.cases) and res.cases
        return
    assert res.error_kind == "unsupported_interpreter", f"{res.stage}/{res.error_kind}: {res.error_msg}"
    assert len(res.error_msg) > 20 and "interpreter" in res.error_msg, res.error_msg
