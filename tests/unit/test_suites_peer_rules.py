"""The pieces that judge external kernels as their peers do: non-tensor returns made tensors, the
stricter-verdict reasons, and another harness's kernels read as replay rows (JSONL and folders)."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import torch

from kbx_ray.llm.replay import read_rows
from kbx_ray.llm.replay_files import ReplayFilesError, with_peer_entry
from kbx_ray.suites import tensorize
from kbx_ray.suites.peer import stricter_reason


def test_non_tensor_returns_become_tensors_in_one_shape():
    z = torch.tensor([1 + 2j, 3 - 1j])
    out = tensorize.to_tensors({"b": (1.5, None), "a": [True, 3], "c": z.conj(), "s": 2j})
    again = tensorize.to_tensors({"s": 2j, "c": z.conj(), "a": [True, 3], "b": (1.5, None)})
    other = tensorize.to_tensors({"B": (1.5, None), "a": [True, 3], "c": z.conj(), "s": 2j})
    assert len(out) == len(again) and all(torch.equal(a, b) for a, b in zip(out, again))
    assert out[0].dtype == torch.int64 and not torch.equal(out[0], other[0])  # the keys' digest
    assert [t.dtype for t in out[1:]] == [torch.bool, torch.int64, torch.float64, torch.float64,
                                          torch.float32, torch.float64, torch.float64]
    assert out[4].numel() == 0 and torch.equal(out[5], torch.view_as_real(z.conj().resolve_conj()))
    assert float(out[7]) == 2.0
    with pytest.raises(TypeError, match="returned a object, which has no tensor form"):
        tensorize.to_tensors(object())
    assert tensorize.plain((torch.ones(1), torch.ones(2))) and not tensorize.plain(z)
    assert not tensorize.plain(3.0) and tensorize.plain(None)


def test_the_wrapper_shows_the_reference_signature_and_hands_back_what_was_returned():
    def inplace_relu(x: torch.Tensor, y: torch.Tensor) -> tuple:
        return x.relu_(), 2.5

    sig = inspect.signature(inplace_relu)
    wrapped = tensorize.wrap(lambda *a, **k: inplace_relu(*a, **k), sig)
    x = torch.tensor([-1.0, 2.0])
    a, b = wrapped(x, torch.ones(2))
    assert a is not x and a.data_ptr() == x.data_ptr()  # the evaluator judges aliasing, not us
    assert b.dtype == torch.float64 and float(b) == 2.5
    assert inspect.signature(wrapped) == sig


@pytest.mark.parametrize("stage,kind,msg,why", [
    ("correctness", "disqualified", "case a: seed 0: no Triton kernel was launched", "no Triton"),
    ("correctness", "disqualified", "computes with torch ops ['aten.add']", "torch computes"),
    ("static", "disqualified", "imports os", "static policy: imports os"),
    ("correctness", "mismatch", "case a: seed 0: task check: mutated argument 'x': 1 of 3",
     "declared-mutated"),
    ("correctness", "mismatch", "case a: seed 2: output 0: 1 of 3 values", "later seed only"),
    ("timing", "mismatch", "case a, its call on fresh values after timing: returned the same output as "
     "for an earlier input set although the inputs changed (a cached or stale result): x", "stale"),
    ("timing", "mismatch", "case a, its call on fresh values after timing: differs from the reference: "
     "x", "a wrong result after timing"),
    ("correctness", "input_mutated", "inputs [0] changed", "changed an input"),
    ("correctness", "mismatch", "case a: seed 0: output 0: 1 of 3 values", ""),
    ("correctness", "runtime_error", "boom", ""),
    ("done", "", "", ""),
])
def test_stricter_reason_names_only_checks_the_peer_does_not_make(stage, kind, msg, why):
    got = stricter_reason(stage, kind, msg)
    assert (why in got and got) if why else got == ""


def test_kernelbenchx_jsonl_and_folders_become_replay_rows(tmp_path: Path):
    kf = "import triton\n\ndef kernel_function(x):\n    return x\n"
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(json.dumps(r) for r in [
        {"predict": f"Sure:\n```python\n{kf}```\nDone.", "file": "Math/sub.py", "ok": True},
        {"predict": "def sub(x):\n    return x\n", "file": "Math/sub.py", "verdict": "fail"},
        {"code": "def relu(x):\n    return x\n", "file": "Activation/relu.py"}]) + "\n")
    rows = read_rows(preds)
    assert [(r["task_id"], r["sample"], r["peer_verdict"]) for r in rows] == [
        ("Math/sub", 0, "pass"), ("Math/sub", 1, "fail"), ("Activation/relu", 0, "")]
    assert "def sub(*args, **kwargs)" in rows[0]["completion"] and "Done." not in rows[0][
        "completion"]
    assert rows[1]["completion"].count("def sub") == 1
    assert with_peer_entry("x = (", "sub") == "x = ("  # unparsable code is served as written
    folder = tmp_path / "kernels"
    (folder / "Math").mkdir(parents=True)
    (folder / "Math" / "sub__v2.py").write_text('"""peer: fail"""\n' + kf)
    (folder / "relu.py").write_text('"""task: Activation/relu\npeer: pass"""\ndef relu(x):\n'
                                    "    return x\n")
    rows = read_rows(folder)
    assert [(r["task_id"], r["peer_verdict"]) for r in rows] == [("Math/sub", "fail"),
                                                                 ("Activation/relu", "pass")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"predict": "x", "file": "no_such_task_anywhere.py"}) + "\n")
    with pytest.raises(ReplayFilesError, match="names no category"):
        read_rows(bad)


def test_a_later_seed_is_told_from_the_recorded_seeds():
    from kbx_ray.suites.peer import of_result
    from kbx_ray.types import CaseResult, EvalResult

    res = EvalResult("t", "c", stage="correctness", error_kind="mismatch",
                     cases=[CaseResult("a", seeds=3, ok=True), CaseResult("b", seeds=3)])
    res.seeds = [11, 12, 13, 21, 22, 23]  # the evaluator records its (secret) seeds in order
    res.error_msg = "case b: seed 21: output 0: wrong"
    assert of_result(res) == ""            # b's first seed: the peer would see it too
    res.error_msg = "case b: seed 22: output 0: wrong"
    assert "later seed" in of_result(res)
