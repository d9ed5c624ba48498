"""Every elementwise solution agrees with its reference on the adversarial values the reference
defines for finite inputs: signed zeros (a branch cut: atan2(-0, -1) = -pi), exact ties for
rounding (+-0.5, +-1.5, +-2.5), and the integers and units around them.

A random draw produces a negative zero or a tie only sometimes (a float16 cast of a tiny negative
normal is -0), so a solution wrong there fails one evaluation in a few; here each value, and each
pair of values for two-operand tasks, is written into the first small case of every task whose
output has its inputs' broadcast shape, and the solution runs on them under the interpreter (in a
child process: TRITON_INTERPRET must be set before Triton is imported). NaN and infinities are
left to the task files: most contracts exclude them (their draws hold them where they admit them).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EDGES = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0, 3.0, -3.0]

_CHILD = r"""
import importlib.util, json, sys
import torch
from kbx_ray.evaluate.parent import correctness
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module

EDGES = json.loads(sys.argv[1])
n = len(EDGES)
out = {}
for task in load_suite():
    mod = load_module(task.path)
    case = next(c for c in task.cases if c["small"])
    args, kwargs = mod.make_inputs(case, 0, "cpu")
    floats = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not floats or len(floats) > 2 or task.mutates or getattr(mod, "check", None):
        continue
    try:
        shape = torch.broadcast_shapes(*[args[i].shape for i in floats])
        ref = correctness.flatten(getattr(mod, task.name)(*args, **kwargs))
    except Exception:
        continue
    if len(ref) != 1 or ref[0].shape != shape or shape.numel() < n * n:
        continue  # not elementwise over its inputs
    args = list(args)
    for j, i in enumerate(floats):  # every value against every value for two operands
        vals = torch.tensor(EDGES, dtype=args[i].dtype)
        x = args[i].contiguous().clone()
        if x.numel() >= n * n:
            x.view(-1)[: n * n] = vals.repeat_interleave(n) if j == 0 else vals.repeat(n)
        args[i] = x
    spec = importlib.util.spec_from_file_location("solution_" + task.name, task.solution_path)
    sol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sol)
    ref = correctness.flatten(getattr(mod, task.name)(*args, **kwargs))
    got = correctness.flatten(getattr(sol, task.name)(*[a.clone() if isinstance(a, torch.Tensor) else a
                                                        for a in args], **kwargs))
    v = correctness.compare(got, ref, mod, case)
    out[task.task_id] = "" if v.ok else f"{case['name']}: {v.message}"
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def verdicts() -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(EDGES)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=1200)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_every_elementwise_solution_agrees_on_signed_zeros_and_ties(verdicts):
    assert len(verdicts) >= 40, sorted(verdicts)  # the elementwise tasks were found
    assert {"math/atan2", "math/round", "math/reciprocal", "math/div", "math/sign"} <= set(verdicts)
    wrong = {t: why for t, why in verdicts.items() if why}
    assert not wrong, wrong


@pytest.mark.parametrize("task_id,kept", [
    ("math/reciprocal", lambda c: True), ("math/rsqrt", lambda c: c.get("nonpositive")),
    ("math/digamma", lambda c: not c.get("positive")), ("math/pow", lambda c: not c.get("positive")),
])
def test_poles_at_zero_draw_both_zeros_in_every_case(task_id, kept):
    """Where the sign of a zero decides an infinity's sign (1 / -0 = -inf), every case that can
    draw a zero at all holds both, not only when a float16 cast happens to make a -0."""
    import torch

    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.task_import import load_module

    mod = load_module(get_task(task_id).path)
    for case in (c for c in mod.CASES if kept(c)):
        if not case["small"]:
            case = {**case, "shape": [min(s, 8) for s in case["shape"]]}
        (x,), _ = mod.make_inputs(case, 3, "cpu")
        if x.numel() < 2:
            continue  # a one-element case keeps its drawn value (taskkit.edges)
        zeros = x[x == 0]
        assert bool(zeros.signbit().any()) and bool((~zeros.signbit()).any()), (task_id, case["name"])


def test_atan2_draws_its_branch_cut_in_every_case():
    """The oracle is deterministic: every case of atan2, small or large, holds (-0, -1) and
    (+0, -0), whatever the seed, so a solution wrong at the branch cut fails every run."""
    import torch

    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.task_import import load_module

    mod = load_module(get_task("math/atan2").path)
    for case in mod.CASES:
        if not case["small"]:
            case = {**case, "shapes": [[min(s, 8) for s in sh] for sh in case["shapes"]]}
        for seed in (0, 7):
            (y, x), _ = mod.make_inputs(case, seed, "cpu")
            if min(y.numel(), x.numel()) < 2:
                continue  # a one-element operand keeps its draw: float32 never draws a -0
            out = torch.atan2(y, x)
            yb, xb = torch.broadcast_tensors(y, x)
            cut = (yb == 0) & yb.signbit() & ((xb < 0) | ((xb == 0) & xb.signbit()))
            assert bool(cut.any()) and bool((out[cut] < -3.1).all()), case["name"]
