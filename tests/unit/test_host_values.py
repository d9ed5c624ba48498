"""host_values: where the call's own float arguments may go (issue 26, INTEGRITY.md class 4).

Ints are sizes and are never matched against kept float values; the interpreter's own host copies
are not the candidate's torch calls; a new tensor may hold the call's arguments verbatim, never a
number the host computed from them, and no in-place fill may take one."""
from __future__ import annotations

import pytest
import torch

from kbx_ray.evaluate.worker import host_values as hv
from kbx_ray.evaluate.worker import marked_numbers as mn
from kbx_ray.evaluate.worker.ledger import MONITOR


@pytest.fixture()
def call():
    """A checked call on (x, alpha=10.0, beta=2.5) with the host-values mode held."""
    x = torch.arange(12.0)
    MONITOR.reset(((x,), {}))
    (x, alpha, beta), _ = hv.mark_inputs((x, 10.0, 2.5), {})
    hv.begin()
    MONITOR.active = True
    try:
        with hv.make_mode():
            yield x, alpha, beta
    finally:
        MONITOR.active = False
        MONITOR.reset()
        hv.begin()


def test_ints_are_sizes_never_matched_against_kept_floats(call):
    _, alpha, _ = call
    kept = float(alpha)  # the conversion drops the mark and keeps the value
    assert type(kept) is float and hv.find(kept) == mn.INPUT
    assert hv.find(10) is None and hv.find([10, 10.0]) == mn.INPUT
    assert torch.empty(10, 10).view(5, 20).shape == (5, 20)  # sizes equal to the argument


def test_a_new_tensor_may_hold_the_calls_own_arguments_verbatim(call):
    x, alpha, beta = call
    built = [torch.full_like(x, float(alpha)), torch.full((3,), beta), x.new_full((2,), alpha),
             torch.tensor([alpha, beta]), torch.as_tensor(float(beta))]
    with pytest.raises(hv.HostValueError, match="full_like"):
        torch.full_like(x, alpha * beta)  # computed on the host from the arguments
    with pytest.raises(hv.HostValueError, match="tensor"):
        torch.tensor([beta ** 2])
    with pytest.raises(hv.HostValueError, match="fill_"):
        torch.empty(3).fill_(alpha)  # an in-place fill may write an output
    with pytest.raises(hv.HostValueError, match="add"):
        x + alpha
    MONITOR.active = False
    assert [t.tolist() for t in built] == [[10.0] * 12, [2.5] * 3, [10.0] * 2, [10.0, 2.5], 2.5]


def test_numbers_read_back_never_fill_a_tensor(call):
    x, alpha, _ = call
    total = mn.mark(66.0, mn.READ)  # what `x.sum().item()` returns inside a call
    with pytest.raises(hv.HostValueError, match="read back"):
        torch.full_like(x, total)
    with pytest.raises(hv.HostValueError, match="read back"):
        torch.tensor([alpha, total])


def test_the_interpreters_host_copies_are_not_the_candidates_calls(call):
    """Triton's interpreter copies a tensor to the host with `set_(storage, offset, size, stride)`
    (`_to_cpu`): its ints are the tensor's layout, whatever float the call was handed."""
    _, alpha, _ = call
    src = ("def _to_cpu(t, v):\n"
           "    torch.full((2,), v)\n"
           "    return t.new_empty(0).set_(t.untyped_storage(), 0, (10,), (1,))\n"
           "def mine(v):\n"
           "    return torch.full((2,), v)\n")
    ns: dict = {"torch": torch}
    exec(compile(src, "/lib/triton/runtime/interpreter.py", "exec"), ns)  # noqa: S102
    assert ns["_to_cpu"](torch.zeros(12), alpha * 2).shape == (10,)
    with pytest.raises(hv.HostValueError):
        ns["mine"](alpha * 2)  # a function of that file with another name is still checked
