"""`common.digest`: the worker's and the parent's reduction of a kept output to one integer."""
from __future__ import annotations

import torch

from kbx_ray.evaluate.common import digest as d


def test_equal_values_equal_digests_whatever_the_layout():
    x = torch.randn(300, 500)
    assert d.digest(x) == d.digest(x.clone()) == d.digest(x.t().contiguous().t())
    assert d.digest(torch.empty(0)) == 0


def test_one_changed_bit_or_a_swap_changes_it():
    x = torch.randn(70_000)
    y = x.clone()
    y.view(torch.int32)[12345] ^= 1  # one ulp
    assert d.digest(y) != d.digest(x)
    z = x.clone()
    z[[10, 20]] = z[[20, 10]]  # same multiset of values, other positions
    assert d.digest(z) != d.digest(x)


def test_every_dtype_and_odd_byte_counts(monkeypatch):
    monkeypatch.setattr(d, "SLAB", 1 << 16)  # several slabs and a padded last row
    for t in (torch.arange(7, dtype=torch.uint8), torch.tensor([True, False, True]),
              torch.randn(5, dtype=torch.float16), torch.randn(3, 3, dtype=torch.complex64),
              torch.randint(-9, 9, (200_001,), dtype=torch.int64)):
        a = d.digest(t)
        assert isinstance(a, int) and 0 <= a < d.PRIME and a == d.digest(t.clone())
    assert d.digest(torch.zeros(4, dtype=torch.uint8)) != d.digest(torch.zeros(8, dtype=torch.uint8))


def _sample(t, seed):
    from kbx_ray.evaluate.protocol import tensor_to_wire
    from kbx_ray.evaluate.reply import OutputMeta, TimedSample

    meta, raw = tensor_to_wire(t)
    return TimedSample(seed=seed, outputs=(OutputMeta(
        dtype=meta["dtype"], shape=tuple(meta["shape"]), stride=tuple(meta["stride"]),
        offset=meta["offset"]),)), bytearray(raw.tobytes())


def test_an_output_rewritten_after_its_digest_is_disqualified():
    """The worker keeps each set's last timed output until the recheck sends it; its digest went
    to the parent with the time reply. An output rewritten in between (a later case's calls run
    in that process) no longer matches: disqualified, before any value is compared."""
    import pytest

    from kbx_ray.evaluate.parent.case_checks import Fail, check_timed_calls
    from kbx_ray.evaluate.reply import TimedCheck
    from kbx_ray.types import ErrorKind

    kept = torch.zeros(1000)  # what a timed call returned, fast and wrong
    sent = torch.randn(1000)  # what the process later wrote there before the recheck sent it
    sample, blob = _sample(sent, 7)
    checked = TimedCheck(calls=10, launchless=0, repeated=0, error="", samples=(sample,),
                         fresh_ms=(), digests=((d.digest(kept),),))
    with pytest.raises(Fail) as e:
        check_timed_calls({"name": "c"}, checked, [blob], "cpu", None,
                          lambda seed: pytest.fail("compared values of a rewritten output"))
    assert e.value.kind == ErrorKind.DISQUALIFIED and "changed after" in e.value.msg
    short = TimedCheck(calls=10, launchless=0, repeated=0, error="", samples=(sample,),
                       fresh_ms=(), digests=())
    with pytest.raises(Fail) as e:
        check_timed_calls({"name": "c"}, short, [blob], "cpu", None, lambda seed: None)
    assert e.value.kind == ErrorKind.INFRA_ERROR
