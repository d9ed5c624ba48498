"""One preset decodes alike on the `vllm` backend and on `openai` against a real `vllm serve`.

The tiny model gets a generation_config.json (top_k, top_p, repetition_penalty) that the preset
does not override: `vllm serve` fills unset sampling fields from it, and so must the in-process
backend. The openai backend's request is caught on the wire by a stub server and compared with the
vllm backend's; then the real server and the real engine decode the same prompts with the same
seeds into the same texts. The server is conftest.py's `vllm_server` (shared with
test_llm_openai_vllm.py), which serves such a copy of the model."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fixtures.tiny_model import require_vllm, tiny_model_dir
from fixtures.vllm_serve import GENERATION_CONFIG, tiny_with_generation_config

from kbx_ray.config.compose import load_config
from kbx_ray.llm.base import GenParams, build_backend

pytestmark = pytest.mark.slow
MSGS = [{"role": "system", "content": "You write Triton kernels."},
        {"role": "user", "content": "Write relu(x) as a Triton kernel."}]
SAMPLING = "model.options.sampling={min_p: 0.05}"  # the preset's own extra sampling field


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    require_vllm()
    return tiny_with_generation_config(tiny_model_dir(),
                                       tmp_path_factory.mktemp("tiny-gencfg") / "tiny")


def presets(path, url: str):
    """The same model settings under both backends (temperature and max_tokens from the preset)."""
    vllm = load_config(["model=tiny", f"model.path={path}", "model.temperature=1.0",
                        SAMPLING]).model
    openai = dataclasses.replace(vllm, backend="openai", path="tiny",
                                 options={"sampling": dict(vllm.options["sampling"]),
                                          "base_url": url, "retries": 0})
    return vllm, openai


class _Stub(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_GET(self):  # noqa: N802 - the model list
        self._send({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        _Stub.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": "tiny",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_the_same_preset_builds_the_same_request_on_both_backends(model_dir):
    from kbx_ray.llm.vllm_replica import VLLMReplica, sampling_params

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        vllm_cfg, openai_cfg = presets(model_dir, f"http://127.0.0.1:{server.server_port}/v1")
        params = GenParams(temperature=vllm_cfg.temperature, max_tokens=vllm_cfg.max_tokens, seed=5)
        asyncio.run(build_backend(openai_cfg).generate(MSGS, params))
    finally:
        server.shutdown()
    (wire,) = _Stub.bodies
    replica = VLLMReplica.__new__(VLLMReplica)  # the request alone: no engine
    replica.name, replica.sampling = "tiny", dict(vllm_cfg.options["sampling"])
    assert wire == {**replica.request(MSGS, params), "model": "tiny"}
    assert "top_p" not in wire and "top_k" not in wire  # unset: the generation config decides
    sp = sampling_params(wire, n_prompt=20, max_len=2048, defaults=GENERATION_CONFIG)
    assert (sp.top_k, sp.top_p, sp.repetition_penalty, sp.min_p) == (3, 0.6, 1.8, 0.05)
    assert (sp.temperature, sp.seed, sp.max_tokens) == (1.0, 5, vllm_cfg.max_tokens)


def test_vllm_serve_and_the_vllm_backend_decode_the_same_texts(vllm_server):
    from kbx_ray.llm.vllm_replica import VLLMReplica
    from kbx_ray.llm.vllm_spec import spec_from

    seeds = (1, 2, 3)
    vllm_cfg, openai_cfg = presets(vllm_server.model_dir, vllm_server.url)  # the served model
    client = build_backend(openai_cfg)

    async def served():
        return await asyncio.gather(*(client.generate(MSGS, GenParams(
            temperature=1.0, max_tokens=24, seed=s)) for s in seeds))
    over_http = asyncio.run(served())

    spec = spec_from(vllm_cfg)
    engine_kwargs = {**spec.engine, "max_num_seqs": 32}  # as the server above

    async def in_process():
        replica = VLLMReplica(engine_kwargs, spec.name, spec.sampling)
        try:
            assert replica.defaults == GENERATION_CONFIG  # the model's, as vllm serve reads them
            gens = await asyncio.gather(*(replica.generate(MSGS, GenParams(
                temperature=1.0, max_tokens=24, seed=s)) for s in seeds))
            replica.defaults = {}  # as the backend was: the generation config ignored
            blind = await asyncio.gather(*(replica.generate(MSGS, GenParams(
                temperature=1.0, max_tokens=24, seed=s)) for s in seeds))
            return gens, blind
        finally:
            replica.shutdown()
    here, blind = asyncio.run(in_process())
    assert [g.text for g in here] == [g.text for g in over_http]
    assert [g.text for g in blind] != [g.text for g in over_http]  # the test can tell
    assert [g.prompt_tokens for g in here] == [g.prompt_tokens for g in over_http]
    assert len({g.text for g in here}) == len(seeds)  # seeded sampling, not one greedy text
