"""A wrong timed or rechecked call's message (parent/case_checks.timed_mismatch): 'stale' only
where the check proved it (the output of an earlier input set, bit for bit, on changed inputs);
otherwise the values that differ from the reference, and where."""
from __future__ import annotations

import torch

from kbx_ray.evaluate.parent.case_checks import same_bits, timed_mismatch
from kbx_ray.evaluate.parent.correctness import compare


class _Task:
    pass


def test_a_wrong_answer_is_named_by_its_values_not_called_stale():
    ref = [torch.tensor([0.0, 3.14159265, 1.0])]
    out = [torch.tensor([0.0, -3.14159265, 1.0])]  # off by 2 pi at the branch cut
    v = compare(out, ref, _Task(), {"name": "c"})
    msg = timed_mismatch("case c, its call on fresh values after timing", v, out,
                         [[torch.tensor([5.0, 6.0, 7.0])]])
    assert "differs from the reference" in msg and "stale" not in msg
    assert "case c" in msg and "-3.14159 vs 3.14159" in msg, msg


def test_the_same_bits_as_an_earlier_input_set_is_stale():
    earlier = [torch.tensor([1.0, float("nan"), -0.0])]
    out = [earlier[0].clone()]
    ref = [torch.tensor([2.0, float("nan"), 0.0])]
    v = compare(out, ref, _Task(), {"name": "c"})
    msg = timed_mismatch("case c, input set 1 of 2", v, out, [earlier])
    assert "(a cached or stale result)" in msg and "input set 1 of 2" in msg, msg
    assert not same_bits([torch.tensor([0.0])], [torch.tensor([-0.0])])  # bits, not values
    assert not same_bits(out, [earlier[0].double()])
