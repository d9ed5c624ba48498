"""The worker's environment, limits and working directory."""
import os

from kbx_ray.evaluate.parent.spawn import scrubbed_env
from kbx_ray.evaluate.settings import SandboxConfig


def test_secrets_never_reach_the_worker(monkeypatch):
    for k in ("WANDB_API_KEY", "HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY",
              "MY_SERVICE_TOKEN", "SOME_KEY", "DB_PASSWORD", "TRITON_SECRET_KEY"):
        monkeypatch.setenv(k, "s3cr3t")
    env = scrubbed_env(SandboxConfig(), "/tmp/x")
    assert "s3cr3t" not in env.values()
    assert env["HOME"] == "/tmp/x" and env["KBX_DEVICE"] == "cpu"


def test_worker_runs_in_its_own_session_and_temp_dir(cpu_evaluator):
    sbx = cpu_evaluator.sandbox
    if not sbx.alive:
        sbx.request({"op": "hello"}, 60)
    pid = sbx.proc.pid
    assert os.getsid(pid) == pid  # its own session: killpg reaches every child
    assert os.readlink(f"/proc/{pid}/cwd") == sbx.home
    limits = open(f"/proc/{pid}/limits").read()
    assert "Max file size" in limits and str(64 << 20) in limits
