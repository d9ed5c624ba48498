"""The worker-to-parent reply is a typed record parsed strictly (kbx_ray/evaluate/reply.py): a
missing, unknown or mistyped field is a `ReplyError` naming it, never a default that passes."""
from __future__ import annotations

import json

import pytest
import torch

from kbx_ray.evaluate import reply
from kbx_ray.evaluate.parent import case_checks
from kbx_ray.evaluate.parent.timing_judgement import timing_record
from kbx_ray.evaluate.reply import CallReport, OutputMeta, ReplyError, RunReply, parse, wire
from kbx_ray.evaluate.worker.outputs import encode
from kbx_ray.evaluate.common.timing import Timing


def _report(**kw) -> CallReport:
    base = dict(launches=1, launch_free=False, torch_ops=(), aliased=False, mutated=(),
                structure="tensor", side_stream_launches=0, stream_changed=False, tampered=())
    return CallReport(**{**base, **kw})


def _on_the_wire(record) -> dict:
    return json.loads(json.dumps(wire(record)))


def test_a_record_round_trips_through_json():
    blobs: list = []
    rep = _report(outputs=encode([torch.arange(6.0).reshape(2, 3).t()], blobs), mutated=(1,))
    run = RunReply(results=(rep,), prof={"call": 0.5})
    assert reply.parse_reply(RunReply, {**_on_the_wire(run), "ok": True, "blobs": [24]}, "run") == run
    assert run.results[0].outputs[0] == OutputMeta("float32", (3, 2), (1, 3), 0)


@pytest.mark.parametrize("field", [f for f in CallReport.__dataclass_fields__])
def test_every_missing_field_is_refused_by_name(field):
    d = _on_the_wire(_report())
    del d[field]
    with pytest.raises(ReplyError, match=f"'{field}' is missing"):
        parse(CallReport, d)


@pytest.mark.parametrize("field,value", [
    ("aliased", 1), ("aliased", "no"), ("launches", True), ("launches", 1.0), ("mutated", 3),
    ("mutated", ["0"]), ("torch_ops", "mul"), ("outputs", [{"dtype": "float32"}]),
    ("outputs2", {}), ("tampered", None),
])
def test_a_wrong_type_is_refused_by_name(field, value):
    d = _on_the_wire(_report())
    d[field] = value
    with pytest.raises(ReplyError, match=f"CallReport.{field}"):
        parse(CallReport, d)


def test_an_unknown_or_renamed_field_is_refused():
    d = _on_the_wire(_report())
    d["aliases"] = d.pop("aliased")  # a rename on one side only
    with pytest.raises(ReplyError, match="'aliases'"):
        parse(CallReport, d)


def test_a_malformed_reply_is_a_verdict_that_cannot_be_given():
    d = {"results": [_on_the_wire(_report())], "prof": {}}
    del d["results"][0]["launch_free"]
    with pytest.raises(case_checks.Fail) as e:
        case_checks.read(RunReply, d, "run", "correctness")
    assert e.value.kind == "infra_error" and "launch_free" in e.value.msg
    with pytest.raises(case_checks.Fail) as e:
        timing_record({"median_ms": 1.0})
    assert e.value.kind == "infra_error" and "p20_ms" in e.value.msg


def test_timing_parses_without_its_per_call_times():
    t = Timing(median_ms=1.0, p20_ms=0.9, p80_ms=1.1, reps=7, rel_ci=float("inf"), wall_s=0.1,
               event_sum_ms=7.0, feed="queued", times_ms=[1.0] * 7)
    back = timing_record(json.loads(json.dumps(t.to_dict())))
    assert back == Timing(**{**t.to_dict(), "times_ms": []})


@pytest.mark.parametrize("dtype,words", [(torch.bits16, "cannot compare"),
                                         (torch.float8_e4m3fn, "cannot compare"),
                                         (torch.int16, "integer")])
def test_an_output_outside_the_reference_dtype_family_is_a_dtype_mismatch(dtype, words):
    """Judged in the parent before any comparison, whatever the worker sent: a forged or odd
    output dtype never reaches `torch.equal`/`allclose` (which raise on bits16) nor an
    infra_error."""
    from kbx_ray.types import EvalResult

    ref = [torch.randn(4, 8, dtype=torch.float16)]
    out = torch.zeros(4, 8, dtype=torch.float16).view(dtype)
    blobs: list = []
    first, second = encode([out], blobs), encode([out.clone()], blobs)
    rep = _on_the_wire(_report(outputs=first, outputs2=second))
    info = parse(CallReport, rep)
    blobs = [bytearray(b) for b in blobs]
    outs = case_checks.decode(info.outputs, blobs, "cpu")
    assert outs[0].dtype == dtype
    task = type("T", (), {})()
    assert case_checks.repeat_problem(info, outs, blobs, task, {"name": "c"}, "cpu") is None
    res = EvalResult(task_id="t/x", candidate_id="c")
    v = case_checks.verdict((ref, "tensor", [True]), outs, info, task, {"name": "c"}, res)
    assert (v.ok, v.kind) == (False, "dtype_mismatch") and words in v.message, v.message
