"""External suites (KernelBench, KernelBench-X) adapted into the native Task path: loading the
fixture folders, listing them with `kbx tasks`, clear errors for broken folders, and candidates
judged by the real Evaluator (sandboxed worker, trusted parent)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kbx_ray.errors import SuiteError
from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import Task
from tests.conftest import FIXTURES, make_candidate

KB = FIXTURES / "kernelbench"
KBX = FIXTURES / "kernelbenchx"
SEPARATOR = "#" * 146


@pytest.fixture(scope="module", autouse=True)
def shim_cache(tmp_path_factory: pytest.TempPathFactory):
    """Shims go to a private cache, shared by this module's tests and the CLI runs they start."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("suite_cache")
        mp.setenv("KBX_SUITE_CACHE", str(path))
        yield path


def case_names(task: Task) -> list[str]:
    """The names `kbx tasks` lists and the evaluator reports per case."""
    return [c["name"] for c in task.cases]


def kbx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbx_ray.cli", *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))


def test_kernelbench_levels_become_tasks(shim_cache: Path):
    tasks = load_suite(KB, None, "kernelbench")
    assert [t.task_id for t in tasks] == ["level1/1_ReLU", "level1/2_Add", "level2/1_Linear_ReLU"]
    linear = tasks[2]
    assert (linear.category, linear.level, linear.name) == ("KernelBench/level2", 2, "ModelNew")
    assert "__init__(self, in_features: int, out_features: int)" in linear.signature
    assert "class Model(nn.Module)" in linear.reference_source
    assert "manual_seed(42)" in linear.description
    assert Path(linear.path).parent.parent == shim_cache and linear.solution_path == ""
    only = load_suite(KB, ["level2"], "kernelbench")
    assert [t.task_id for t in only] == ["level2/1_Linear_ReLU"]
    # The shim is the problem as a task module: seeded inputs, the reference under the entry name.
    mod = load_module(linear.path)
    (x0,), _ = mod.make_inputs(linear.cases[0], 0, "cpu")
    (x0b,), _ = mod.make_inputs(linear.cases[0], 0, "cpu")
    (x1,), _ = mod.make_inputs(linear.cases[0], 1, "cpu")
    assert torch.equal(x0, x0b) and not torch.equal(x0, x1)
    torch.manual_seed(42)
    expected = mod.PROBLEM.ns["Model"](24, 10)(x0)
    assert torch.allclose(mod.ModelNew(x0), expected)


def test_kernelbenchx_tests_become_recorded_cases():
    tasks = {t.task_id: t for t in load_suite(KBX, None, "kernelbenchx")}
    assert list(tasks) == ["Activation/relu", "Math/add", "MatrixMultiply/matmul"]
    relu, add, mm = tasks.values()
    assert (relu.category, relu.level, relu.name) == ("Activation", 1, "relu")
    assert relu.signature == "relu(input: torch.Tensor) -> torch.Tensor"
    assert "Math:\nout_i = max(0, input_i)" in relu.description
    assert SEPARATOR not in relu.reference_source and "test_relu" not in relu.reference_source
    # one case per reference call, named by the test_results key its output lands in
    assert case_names(relu) == ["test_case_1", "test_case_2", "test_case_3", "test_case_4"]
    assert case_names(add) == ["test_case_1", "test_case_2", "test_case_3", "call_4",
                                "test_case_4"]
    assert case_names(mm) == ["test_case_1", "test_case_2", "test_case_2_2", "call_4"]
    mod = load_module(add.path)
    args, kwargs = mod.make_inputs(add.cases[2], 0, "cpu")
    assert kwargs == {"alpha": -0.5} and args[0].shape == (17, 31)
    # the test's own manual_seed is neutralised: each evaluation seed draws new random inputs,
    # literal inputs stay as written
    rmod = load_module(relu.path)
    lit = [rmod.make_inputs(relu.cases[0], s, "cpu")[0][0] for s in (0, 1)]
    rnd = [rmod.make_inputs(relu.cases[1], s, "cpu")[0][0] for s in (0, 1, 0)]
    assert torch.equal(*lit) and not torch.equal(rnd[0], rnd[1]) and torch.equal(rnd[0], rnd[2])


def test_a_class_entry_is_extracted_and_passes_static_checks():
    import ast

    from kbx_ray.evaluate.static.checks import static_check
    from kbx_ray.prompting.extract import extract_code

    code = (KB / "candidates" / "linear_relu_correct.py").read_text()
    assert extract_code(f"Here it is:\n```python\n{code}```\n", "ModelNew").strip() == code.strip()
    assert static_check(ast.parse(code), "ModelNew").violations == []
    # a function-entry task still wants its function; a missing class is named as a class
    assert static_check(ast.parse(code), "relu").violations[-1] == \
        "no top-level function named 'relu'"
    assert "no top-level class named 'ModelNew'" in static_check(
        ast.parse(code.replace("class ModelNew", "class Other")), "ModelNew").violations


def _kbx_suite(root: Path, files: dict[str, str], entries: list[dict]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernelbenchx_v1.json").write_text(json.dumps(entries))
    return root


def test_kernelbenchx_in_place_reference_declares_mutates(tmp_path: Path):
    body = ("import torch\n\ndef scale_(x, s: float = 2.0):\n    x.mul_(s)\n\n" + SEPARATOR +
            "\nimport torch\n\ndef test_scale_():\n    x = torch.randn(5, device='cuda')\n"
            "    scale_(x)\n    return {'test_case_1': x}\n\ntest_results = test_scale_()\n")
    root = _kbx_suite(tmp_path, {"Optimizer/scale_.py": body}, [{"name": "scale_"}])
    (task,) = load_suite(root, None, "kernelbenchx")
    assert task.task_id == "Optimizer/scale_" and task.mutates == ("x",) and task.level == 0
    assert case_names(task) == ["call_1"]  # the call returns None: no test_results key holds it


def test_broken_folders_are_one_line_errors(tmp_path: Path):
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "3_Bad.py").write_text("import torch\nclass Model:\n    pass\n"
                                            "def get_inputs():\n    return []\n")
    with pytest.raises(SuiteError, match=r"3_Bad.py: it defines no Model.forward\(\), no "
                                         r"get_init_inputs\(\)"):
        load_suite(kb, None, "kernelbench")
    good = "import torch\n\ndef f(x):\n    return x\n"
    cases = [
        ({"Math/f.py": good + "\ntest_results = {}\n"}, [{"name": "f"}], "Math/f.py: no separator"),
        ({"Math/f.py": good + SEPARATOR + "\nf(1)\n"}, [{"name": "f"}], "no `test_results ="),
        ({"Math/f.py": good}, [{"name": "g", "category": "Math"}], "no file Math/g.py"),
        ({}, [{"title": "f"}], "entry 0 has no \"name\""),
    ]
    for i, (files, entries, needle) in enumerate(cases):
        root = _kbx_suite(tmp_path / f"x{i}", files, entries)
        with pytest.raises(SuiteError) as e:
            load_suite(root, None, "kernelbenchx")
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    (tmp_path / "x0" / "kernelbenchx_v1.json").write_text("[{")
    with pytest.raises(SuiteError, match="not valid JSON"):
        load_suite(tmp_path / "x0", None, "kernelbenchx")


def test_cli_lists_external_suites():
    r = kbx("tasks", "suite=kernelbench", f"suite.path={KB}")
    assert r.returncode == 0, r.stderr
    assert "level2/1_Linear_ReLU" in r.stdout and "KernelBench/level2" in r.stdout
    assert r.stdout.strip().endswith("3 tasks")
    r = kbx("tasks", "--json", "suite=kernelbenchx", f"suite.path={KBX}", "suite.include=[Math]")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["id"] == "Math/add" and row["category"] == "Math" and "call_4" in row["cases"]
    for args, needle in [(("suite=kernelbench",), "needs suite.path"),
                         (("suite=kernelbenchx", "suite.path=/no/such/dir"), "does not exist"),
                         (("suite=kernelbench", f"suite.path={KBX}"), "no KernelBench problems")]:
        r = kbx("tasks", *args)
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("suite,root,task_id,stem", [
    ("kernelbench", KB, "level2/1_Linear_ReLU", "linear_relu"),
    ("kernelbenchx", KBX, "Activation/relu", "relu"),
])
def test_candidates_are_judged_by_the_evaluator(cpu_evaluator, suite, root, task_id, stem):
    (task,) = load_suite(root, [task_id], suite)
    good = (root / "candidates" / f"{stem}_correct.py").read_text()
    bad = (root / "candidates" / f"{stem}_wrong.py").read_text()
    res = cpu_evaluator.evaluate(task, make_candidate(task.task_id, task.name, good))
    assert res.exec_ok and res.stage == "done", (res.error_kind, res.error_msg)
    assert [c.case for c in res.cases] == case_names(task) and all(c.seeds == 3 for c in res.cases)
    res = cpu_evaluator.evaluate(task, make_candidate(task.task_id, task.name, bad))
    assert not res.exec_ok and res.call_ok and res.error_kind == "mismatch", res.error_msg


def test_kbx_eval_runs_an_external_candidate():
    cand = KBX / "candidates" / "relu_correct.py"
    r = kbx("eval", "Activation/relu", str(cand), "suite=kernelbenchx", f"suite.path={KBX}",
            "evaluation.device=cpu", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(r.stdout)["exec_ok"] is True


def test_a_kernelbench_candidate_compiles_ahead_through_its_bound_model(shim_cache: Path):
    """The compile node builds ModelNew as the GPU worker does (the task's bind_candidate), so its
    forward's kernels are compiled for the target architecture."""
    from kbx_ray.evaluate.parent.aot import compile_candidate

    task = next(t for t in load_suite(KB, None, "kernelbench") if t.task_id.startswith("level2"))
    code = (KB / "candidates" / "linear_relu_correct.py").read_text()
    res = compile_candidate(task, make_candidate(task.task_id, task.name, code), 90)
    assert res.error == "" and all(v == "ok" for v in res.cases.values()), res.cases
    assert res.kernels >= 1
