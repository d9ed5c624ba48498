"""interp_order: under the Triton interpreter a launch's programs run in a secret shuffled order,
each exactly once, drawn afresh per launch and per process, so a kernel that relies on programs
running one after another (the e7_ fixtures) fails as it would on a GPU, and one that does not
(a ticket from an atomic, a second launch) still passes. Kernels run in a child process, as in
the worker: TRITON_INTERPRET must be set before triton is imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import pytest

from kbx_ray.evaluate.worker import interp_order

pytestmark = pytest.mark.slow  # starts each test runs in a child process

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from triton.runtime import interpreter as it
from kbx_ray.evaluate.worker import interp_compat

B = it.InterpreterBuilder
plain = B.set_grid_dim, B.set_grid_idx
interp_compat.install()
if sys.argv[1] == "sequential":
    B.set_grid_dim, B.set_grid_idx = plain


@triton.jit
def _ticket(ctr_ptr, out_ptr):
    pid = (tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(2) + tl.program_id(2)
    t = tl.atomic_add(ctr_ptr, 1)  # the order the programs ran in
    tl.store(out_ptr + t, pid)


@triton.jit
def _chained(x_ptr, y_ptr, carry_ptr, BLOCK: tl.constexpr):
    b = tl.program_id(0)  # a running sum handed from block to block through memory
    x = tl.load(x_ptr + b * BLOCK + tl.arange(0, BLOCK))
    before = tl.where(b > 0, tl.load(carry_ptr + tl.maximum(b - 1, 0)), 0.0)
    tl.store(y_ptr + b * BLOCK + tl.arange(0, BLOCK), tl.cumsum(x, axis=0) + before)
    tl.store(carry_ptr + b, before + tl.sum(x, axis=0))


@triton.jit
def _atomic_sum(x_ptr, out_ptr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + b * BLOCK + tl.arange(0, BLOCK)), axis=0))


orders = []
for grid in [(5, 4, 3), (5, 4, 3), (1, 1, 1), (7,)]:
    n = 1
    for g in grid:
        n *= g
    ctr, out = torch.zeros(1, dtype=torch.int32), torch.full((n,), -1, dtype=torch.int32)
    _ticket[grid](ctr, out)
    orders.append(out.tolist())
x = torch.arange(16 * 32, dtype=torch.float32) % 7
y, carry = torch.empty_like(x), torch.full((16,), 1e6)
_chained[(16,)](x, y, carry, BLOCK=32)
total = torch.zeros(1)
_atomic_sum[(16,)](x, total, BLOCK=32)
print(json.dumps({"orders": orders, "chained_right": bool(torch.equal(y, torch.cumsum(x, 0))),
                  "atomic_right": float(total) == float(x.sum())}))
'''


def _run(mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_programs_run_once_each_in_a_fresh_secret_order():
    shuffled, again, sequential = _run("shuffled"), _run("shuffled"), _run("sequential")
    assert sequential["orders"][0] == list(range(60)) and sequential["chained_right"]
    for res in (shuffled, again):
        a, b, one, line = res["orders"]
        assert sorted(a) == sorted(b) == list(range(60)) and sorted(line) == list(range(7))
        assert a != list(range(60)) and a != b and one == [0]  # per launch
        assert not res["chained_right"] and res["atomic_right"]
    assert shuffled["orders"][0] != again["orders"][0]  # per process: seeded by os.urandom


def test_program_order_is_a_bijection_at_every_size():
    rng = np.random.default_rng(0)
    assert interp_order.program_order(rng, 1) is None
    for n in (2, 3, 1000):
        f = interp_order.program_order(rng, n)
        assert sorted(map(f, range(n))) == list(range(n))
    n = interp_order.FULL_SHUFFLE + 6  # the affine map above the bound
    f = interp_order.program_order(rng, n)
    seen = {f(k) for k in range(0, n, 997)}
    assert len(seen) == len(range(0, n, 997)) and all(0 <= v < n for v in seen)
    assert [f(k) for k in range(5)] != list(range(5))
