"""File writers are refused as a class (static/policy.py `value_attr_refused`, reach.py
`_value_attribute`): an attribute read on a runtime value must be one that a value type a
candidate may hold has (tensors, numbers, strings, containers, torch and Triton objects) or one
it defines itself; methods only numpy arrays, files, paths or picklers have stay refused even
when the candidate names a method of its own so."""
from __future__ import annotations

import ast
import textwrap

import pytest

from kbx_ray.evaluate.static import value_attrs as V
from kbx_ray.evaluate.static.checks import static_check

HEAD = '''
import torch
import triton
import triton.language as tl
from collections import namedtuple


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

'''


def _value_refusals(body: str) -> list[str]:
    src = HEAD + textwrap.dedent(body)
    return [v for v in static_check(ast.parse(src), "relu").violations if "on a value" in v]


@pytest.mark.parametrize("body", [
    # a value's own method that writes a file, however the value was reached
    "def relu(x):\n    rows = x.tolist()\n    rows.dump('/tmp/plant')\n    return x\n",
    "def relu(x):\n    y = x.cpu()\n    blob = y.tobytes()\n    return x\n",
    "def relu(x):\n    (x + 0).contiguous().dumps()\n    return x\n",
    "def relu(x):\n    sink = x.detach()\n    sink.write(b'x')\n    return x\n",
    # naming a method of its own `dump` does not open numpy's
    "class Log:\n    def dump(self, p):\n        return p\n\n"
    "def relu(x):\n    x.resolve_conj().dump('/tmp/p')\n    return x\n",
])
def test_file_writers_on_values_are_refused(body):
    assert _value_refusals(body), body


@pytest.mark.parametrize("body", [
    "def relu(x):\n    y = torch.empty_like(x)\n    n = y.numel()\n"
    "    _k[(triton.cdiv(n, 64),)](x.contiguous(), y, n, BLOCK=64)\n"
    "    return y.view(x.shape).to(x.dtype)\n",
    "def relu(x):\n    p = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None\n"
    "    sms = p.multi_processor_count if p is not None else 1\n    return x.clone()\n",
    "def relu(x):\n    v, i = x.max(dim=-1)\n    r = x.max(dim=-1)\n    return r.values + r.indices.float() + v\n",
    "Pair = namedtuple('Pair', 'left right')\n\n"
    "class Plan:\n    block = 64\n\n    def grid(self, n):\n        return (triton.cdiv(n, self.block),)\n\n"
    "def relu(x):\n    plan, pair = Plan(), Pair(1, 2)\n    return x * pair.left + plan.grid(4)[0] * 0\n",
    "def relu(x):\n    fi = torch.finfo(x.dtype)\n    return x.clamp(min=fi.min, max=fi.max).abs().sum(dim=0, keepdim=True)\n",
])
def test_what_honest_kernels_read_on_values_stays_open(body):
    assert _value_refusals(body) == []


def test_no_allowed_value_type_writes_files():
    """The allowlist is built from types: none of them has a file-writing method."""
    writers = {"dump", "dumps", "tofile", "tobytes", "write", "writelines", "save", "savez",
               "write_text", "write_bytes", "touch", "mkdir", "open"}
    assert writers & V.value_attrs() == set()
    assert {"dump", "tofile", "tobytes", "write"} <= V.foreign_attrs()
    assert V.value_attr_refused("dump", {"dump"}) and V.value_attr_refused("block", {"block"}) is None
