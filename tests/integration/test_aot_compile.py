"""Ahead-of-time Triton compiles on a CPU machine for GPUs it does not have (issue 6,
evaluate/parent/aot.py).

Real Triton, real compiles (ptxas from the Triton wheel), in the sandbox; the GPU side (a worker
whose compiles become cache hits) is tests/gpu/test_gpu_eval.py::test_aot_seeded_cache_is_all_hits.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kbx_ray.evaluate.parent import aot
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate


def _solution(task_id: str):  # noqa: ANN202
    task = get_task(task_id)
    return task, make_candidate(task.task_id, task.name, Path(task.solution_path).read_text())


@pytest.mark.parametrize("arch", [80, 90])
def test_a_solution_compiles_for_the_target_arch_on_every_case(arch):
    task, cand = _solution("activation/relu")
    res = aot.compile_candidate(task, cand, arch)
    assert res.error == "" and set(res.cases) == {c["name"] for c in task.cases}
    assert res.triton == __import__("triton").__version__
    assert all(v == "ok" for v in res.cases.values()), res.cases
    assert res.kernels >= 2  # fp32, fp16 and bf16 at least
    ptx = [d.decode() for p, d in res.files.items() if p.endswith(".ptx")]
    assert ptx and all(f".target sm_{arch}" in x for x in ptx)
    groups = [json.loads(d) for p, d in res.files.items() if "/__grp__" in p]
    assert groups and all(not Path(c).is_absolute() and len(Path(c).parts) == 2
                          for g in groups for c in g["child_paths"].values())


def test_seeding_points_groups_at_the_cache_and_refuses_other_names(tmp_path):
    task, cand = _solution("math/exp")
    res = aot.compile_candidate(task, cand, 90)
    assert res.kernels >= 1, res.summary()
    assert aot.seed_cache(res.files, tmp_path) == len(res.files)
    assert aot.seed_cache(res.files, tmp_path) == 0  # already there: left alone
    for grp in tmp_path.glob("*/__grp__*.json"):
        for child in json.loads(grp.read_text())["child_paths"].values():
            assert Path(child).is_file() and Path(child).parent.parent == tmp_path.resolve()
    for bad in ("../evil/x.cubin", "/abs/x.cubin", "KEY12345678/../../x", "KEY12345678/a/b"):
        with pytest.raises(ValueError, match="not a Triton cache entry"):
            aot.seed_cache({bad: b"x"}, tmp_path)
    assert not (tmp_path.parent / "evil").exists()


def test_prints_at_import_and_in_the_launcher_do_not_garble_the_reply():
    task, cand = _solution("activation/relu")
    code = "print('hello from import')\n" + cand.code.replace(
        "def relu(", "def _relu_impl(") + "\n\ndef relu(x):\n    print('launching', x.shape)\n" \
        "    return _relu_impl(x)\n"
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, code), 90)
    assert res.error == "" and all(v == "ok" for v in res.cases.values()) and res.kernels >= 2


def test_a_launcher_that_needs_values_is_traced_on_real_inputs_or_reported_untraced():
    task = get_task("activation/relu")
    code = Path(task.solution_path).read_text() + (
        "\n_orig = relu\n\ndef relu(x):\n    if float(x.abs().max()) > 1e30:\n        return x\n"
        "    return _orig(x)\n")
    cand = make_candidate(task.task_id, task.name, code)
    res = aot.compile_candidate(task, cand, 90, real_inputs_mb=0)  # fake tensors only
    assert res.error == "" and res.kernels == 0
    assert all("DataDependent" in v for v in res.cases.values()), res.cases
    res = aot.compile_candidate(task, cand, 90, real_inputs_mb=1)  # the small cases, for real
    small = {c["name"] for c in task.cases if c["small"]}
    assert {k for k, v in res.cases.items() if v == "ok"} == small and res.kernels >= 2


def test_what_the_static_layer_refuses_is_never_run(tmp_path):
    task = get_task("activation/relu")
    marker = tmp_path / "ran"
    plant = f"open({str(marker)!r}, 'w').write('x')\n" + Path(task.solution_path).read_text()
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, plant), 90)
    assert res.error.startswith("not compiled: ") and "open" in res.error and not res.files
    assert not marker.exists()
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, "def relu(:\n"), 90)
    assert res.error.startswith("syntax error") and not res.files


def test_hostile_candidates_are_contained_by_the_sandbox(monkeypatch):
    """The sandbox layer alone (the static layer, which would refuse these first, switched off)."""
    monkeypatch.setattr(aot, "_refused", lambda task, cand: "")
    task = get_task("activation/relu")
    monkeypatch.setenv("KBX_TEST_API_TOKEN", "s3cr3t-v4lue-xyz")
    leak = ("import os\nraise RuntimeError('token=' + os.environ.get('KBX_TEST_API_TOKEN', 'none'))\n")
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, leak), 90)
    assert "token=none" in res.error and "s3cr3t" not in res.error and not res.files
    t0 = time.monotonic()
    hang = "import time\nwhile True:\n    time.sleep(1)\n"
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, hang), 90,
                                timeout_s=5)
    assert "timed out after 5 s" in res.error and not res.files
    assert time.monotonic() - t0 < 30
    crash = "import os\nos.kill(os.getpid(), 9)\n"
    res = aot.compile_candidate(task, make_candidate(task.task_id, task.name, crash), 90)
    assert "exited with status -9" in res.error


def test_collect_follows_no_link_and_drops_groups_naming_other_keys(tmp_path):
    secret = tmp_path / "home" / ".aws"
    secret.mkdir(parents=True)
    (secret / "credentials").write_text("TOPSECRET")
    cache = tmp_path / "cache"
    key, other = "A" * 20, "B" * 20
    (cache / key).mkdir(parents=True)
    (cache / key / "k.cubin").write_bytes(b"cubin")
    (cache / key / "creds.json").symlink_to(secret / "credentials")  # a link to a file
    (cache / ("C" * 20)).symlink_to(secret, target_is_directory=True)  # a link to a directory
    good = {"child_paths": {"k.cubin": str(cache / key / "k.cubin")}}
    bad = {"child_paths": {"k.cubin": str(cache / other / "k.cubin")}}
    (cache / key / "__grp__k.json").write_text(json.dumps(good))
    (cache / key / "__grp__x.json").write_text(json.dumps(bad))
    (cache / key / "__grp__y.json").write_text("not json")
    files = aot._collect(cache)
    assert set(files) == {f"{key}/k.cubin", f"{key}/__grp__k.json"}
    assert b"TOPSECRET" not in b"".join(files.values())
    assert json.loads(files[f"{key}/__grp__k.json"]) == {"child_paths": {"k.cubin": f"{key}/k.cubin"}}


def test_seeding_writes_nothing_through_a_planted_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    key = "D" * 20
    (cache / key).symlink_to(outside, target_is_directory=True)  # planted by a GPU candidate
    (cache / ("E" * 20)).mkdir()
    (cache / ("E" * 20) / "k.cubin").symlink_to(outside / "authorized_keys")
    n = aot.seed_cache({f"{key}/authorized_keys": b"ssh-rsa x", f"{'E' * 20}/k.cubin": b"x"}, cache)
    assert n == 0 and list(outside.iterdir()) == []


def test_a_seeding_failure_leaves_the_evaluation_alone(tmp_path):
    """The worker's own Triton cache cannot take the files (here a file stands where the
    directory was): the ahead-of-time kernels are dropped and the evaluation goes on."""
    import shutil
    from types import SimpleNamespace

    from kbx_ray.evaluate.parent.actor import _seed
    from kbx_ray.evaluate.parent.sandbox import Sandbox
    from kbx_ray.evaluate.settings import SandboxConfig

    box = Sandbox(SandboxConfig(device="cpu"))
    try:
        box.start()
        cache = Path(box.home) / "triton_cache"
        shutil.rmtree(cache)
        cache.write_text("x")
        res = aot.AotResult(arch=90, files={"F" * 20 + "/k.cubin": b"x"})
        assert _seed(SimpleNamespace(sandbox=box), res) == {"aot_compile": 0.0, "aot_kernels": 0.0}
    finally:
        box.kill()
