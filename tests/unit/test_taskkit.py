"""kbx_ray.taskkit: the drawing helpers the task files share.

Its draws are pinned bit for bit by tests/unit/test_task_inputs_stable.py; here: what its case keys
mean, and that the suite's small cases take every branch of it (nothing in it is dead).
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import coverage
import torch

from kbx_ray import taskkit
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator("cpu").manual_seed(seed)


def test_views_are_taken_from_a_contiguous_tensor_of_the_stored_shape() -> None:
    assert taskkit.stored([3, 5], "t") == [5, 3] and taskkit.stored([2, 3, 5], "s") == [2, 3, 10]
    assert taskkit.stored([2, 3, 5], None) == [2, 3, 5]
    for view, shape in (("t", [3, 5]), ("s", [2, 3, 5]), (None, [4])):
        case = {"shape": shape, "dtype": "float16", "view": view}
        z = taskkit.draw(_gen(), case)
        x = taskkit.finish(z, case, "cpu")
        assert list(z.shape) == taskkit.stored(shape, view) and list(x.shape) == shape
        assert x.dtype == torch.float16 and x.is_contiguous() == (view is None)
        assert x._base is None if view is None else x._base.is_contiguous()
        assert torch.equal(x, taskkit.finish_one(z.half(), torch.float16, "cpu", view))


def test_outliers_scale_one_in_a_thousand_by_ten_after_the_same_normals() -> None:
    plain, wild = taskkit.normal(_gen(), [200_000]), taskkit.normal(_gen(), [200_000], outliers=True)
    moved = plain != wild
    assert torch.equal(wild[moved], plain[moved] * 10) and 100 < int(moved.sum()) < 300
    assert torch.equal(taskkit.normal(_gen(), [64], std=3.0), torch.randn(64, generator=_gen()) * 3.0)
    q = taskkit.int8(_gen(), [10_000], 30, outliers=True)
    assert q.dtype == torch.int8 and int(q.min()) == -127 and int(q.max()) == 127


def test_sprinkle_and_signed_magnitudes() -> None:
    x = taskkit.sprinkle(_gen(), torch.ones(100_000), 0.02, float("nan"))
    assert 1500 < int(x.isnan().sum()) < 2500 and bool((x[~x.isnan()] == 1).all())
    z = torch.randn(1000, generator=_gen(1))
    y = taskkit.signed_magnitudes(_gen(), z)
    assert torch.equal(y.sign(), z.sign()) and float(y.abs().min()) >= 0.5 and float(y.abs().max()) <= 2


def test_operands_follow_their_views_and_broadcast_cost_counts_the_output_once() -> None:
    case = {"shapes": [[33, 65], [65]], "views": ["t", None], "dtype": "float32", "outliers": True}
    x, y = taskkit.finish_operands(tuple(taskkit.operands(_gen(), case)), case, "cpu")
    assert x.shape == (33, 65) and x.stride() == (1, 33) and y.shape == (65,)
    assert taskkit.broadcast_cost(case, 2) == {"flops": 2 * 33 * 65, "bytes": (2 * 33 * 65 + 65) * 4}
    wide = {"shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16"}
    assert taskkit.broadcast_cost(wide, 1) == {"flops": 4096**2, "bytes": (2 * 4096 + 4096**2) * 2}


def test_the_small_cases_of_the_suite_take_every_branch_of_taskkit(tmp_path: Path) -> None:
    path = taskkit.__file__
    cov = coverage.Coverage(branch=True, data_file=None, include=[path])
    cov.start()
    try:
        for task in load_suite():
            mod = load_module(task.path)
            for case in (c for c in task.cases if c["small"]):
                mod.make_inputs(case, 0, "cpu")
                mod.cost(case)
    finally:
        cov.stop()
    cov.json_report(outfile=str(tmp_path / "cov.json"), include=[path])
    (info,) = json.loads((tmp_path / "cov.json").read_text())["files"].values()
    funcs = [f for f in ast.parse(Path(path).read_text()).body if isinstance(f, ast.FunctionDef)]
    bodies = {n.lineno for f in funcs for s in f.body if not (isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Constant)) for n in ast.walk(s) if isinstance(n, ast.stmt)}  # docstrings aside
    assert sorted(bodies & set(info["missing_lines"])) == [] and info["missing_branches"] == []


def test_task_hash_covers_the_shared_draw_helpers(tmp_path):
    """A task's version changes when the taskkit it draws through changes, not only its file."""
    from kbx_ray.suites import builtin as suite

    src = (suite.DEFAULT_ROOT / "activation" / "relu" / "task.py")
    text = src.read_bytes()
    assert b"kbx_ray.taskkit" in text
    plain = tmp_path / "task.py"
    plain.write_bytes(text.replace(b"kbx_ray.taskkit", b"kbx_ray.other_kit"))
    with_kit = suite.task_file_hash(src)
    assert with_kit != suite.hashlib.sha256(text).hexdigest()[:16]
    assert suite.task_file_hash(plain) == suite.hashlib.sha256(plain.read_bytes()).hexdigest()[:16]


def test_edges_land_in_the_first_row_of_any_view() -> None:
    for view, shape in (("t", [3, 5]), ("s", [2, 3, 5]), (None, [4]), (None, [2, 1]), (None, [3])):
        case = {"shape": shape, "dtype": "float16", "view": view}
        drawn = taskkit.finish(taskkit.draw(_gen(), case), case, "cpu")
        before = drawn.clone()
        x = taskkit.edges(drawn, (-0.0, 0.5, -2.5))
        row = x[(0,) * (x.dim() - 1)]
        k = min(3, shape[-1], x.numel() - 1)  # one drawn value always stays
        assert row[:k].tolist() == [-0.0, 0.5, -2.5][:k] and bool(row[0].signbit())
        assert int((x != before).sum()) <= k < x.numel()
        if view is not None:
            assert x._base is not None, "the write went into the view's own storage"
    one = torch.tensor([0.25])
    assert taskkit.edges(one, (-0.0,)).tolist() == [0.25]
