"""`kbx` subcommands as a user runs them (in a subprocess, exit codes and output)."""
import json
import subprocess
import sys

from tests.conftest import FIXTURES


def kbx(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kbx_ray.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_eval_broken_candidate_gives_error_kind_json():
    r = kbx("eval", "activation/relu", str(FIXTURES / "candidates" / "wrong_values.py"), "--json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert res["exec_ok"] is False and res["call_ok"] is True and res["error_kind"] == "mismatch"
    for key in ("error_msg", "flags", "speedup", "cases"):
        assert key in res
    assert res["cases"][0]["case"] == "fp32_small"


def test_eval_solution_passes(tmp_path):
    from kbx_ray.suite import get_task

    r = kbx("eval", "math/exp", get_task("math/exp").solution_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


def test_tasks_json_lists_the_suite():
    r = kbx("tasks", "--json")
    rows = json.loads(r.stdout)
    assert r.returncode == 0 and len(rows) >= 15
    relu = next(x for x in rows if x["id"] == "activation/relu")
    assert relu["category"] == "Activation" and relu["signature"].startswith("relu(x: torch.Tensor)")


def test_user_errors_are_one_line():
    for args, needle in [(("tasks", "bogus=1"), "bogus"),
                         (("eval", "nope/nope", "x.py"), "unknown task 'nope/nope'"),
                         (("sweep", "--dry-run", "hardware=tpu9"), "unknown hardware pool 'tpu9'")]:
        r = kbx(*args)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
