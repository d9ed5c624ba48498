"""The `openai` backend against a real HTTP server on loopback that misbehaves on cue.

The server (stdlib http.server in a thread) plays a script of responses, one per POST, then answers
normally; it records every request, how many were in flight at once, and the headers it saw.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kbx_ray.config.structured import ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.prompting.extract import extract
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.errors import BackendError

OK_BODY = {"id": "x", "model": "tiny", "choices": [{"index": 0, "finish_reason": "stop",
           "message": {"role": "assistant", "content": "```python\ndef relu(x):\n    return x\n```"}}],
           "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
MSGS = [{"role": "user", "content": "write relu"}]


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[dict]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.lock = list(script), threading.Lock()
        self.bodies: list[dict] = []
        self.headers_seen: list[dict] = []
        self.inflight = self.max_inflight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, code: int, body: bytes, headers: dict | None = None) -> None:
        try:
            self.send_response(code)
            for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass

    def do_GET(self) -> None:
        ids = ["tiny", "tiny-2"] if "two" in self.path else ["tiny"]
        self._send(200, json.dumps({"object": "list", "data": [{"id": i} for i in ids]}).encode())

    def do_POST(self) -> None:
        s = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with s.lock:
            s.bodies.append(body)
            s.headers_seen.append({k.lower(): v for k, v in self.headers.items()})  # names: any case
            step = s.script.pop(0) if s.script else {}
            s.inflight += 1
            s.max_inflight = max(s.max_inflight, s.inflight)
        time.sleep(step.get("sleep", 0.0))
        with s.lock:
            s.inflight -= 1
        raw = step.get("raw")
        payload = raw if raw is not None else json.dumps(step.get("json", OK_BODY)).encode()
        self._send(step.get("status", 200), payload, step.get("headers"))


@pytest.fixture
def server(request):
    srv = Scripted(getattr(request, "param", []))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def backend(url: str, **opts: Any) -> Any:
    cfg = ModelConfig(backend="openai", path=opts.pop("path", "tiny"),
                      options={"base_url": url, "retries": 3, "backoff_s": 0.01, **opts})
    return build_backend(cfg)


def gen(b: Any, n: int = 1, **kw: Any) -> list:
    async def main() -> list:
        return await asyncio.gather(*(b.generate(MSGS, GenParams(max_tokens=32, seed=i, **kw))
                                      for i in range(n)))
    return asyncio.run(main())


def test_success_carries_tokens_seed_and_text(server):
    g = gen(backend(server.url), temperature=0.5)[0]
    assert (g.prompt_tokens, g.completion_tokens, g.finish_reason, g.model) == (11, 7, "stop", "tiny")
    assert "def relu" in g.text and g.latency_s > 0
    body = server.bodies[0]
    assert body["model"] == "tiny" and body["seed"] == 0 and body["max_tokens"] == 32
    assert body["temperature"] == 0.5 and body["messages"] == MSGS


@pytest.mark.parametrize("server", [[{"status": 429, "headers": {"Retry-After": "0"}}]], indirect=True)
def test_429_is_retried(server):
    assert gen(backend(server.url))[0].completion_tokens == 7
    assert len(server.bodies) == 2


@pytest.mark.parametrize("server", [[{"status": 500}, {"status": 503}]], indirect=True)
def test_5xx_is_retried_until_it_succeeds(server):
    assert gen(backend(server.url))[0].text.startswith("```python")
    assert len(server.bodies) == 3


@pytest.mark.parametrize("server", [[{"status": 500, "json": {"error": {"message": "boom"}}}] * 9],
                         indirect=True)
def test_persistent_500_gives_one_line(server):
    with pytest.raises(BackendError, match=r"failed 3 times, last: HTTP 500: boom") as e:
        gen(backend(server.url, retries=2))
    assert "\n" not in str(e.value) and len(server.bodies) == 3


@pytest.mark.parametrize("server", [[{"sleep": 1.5}]], indirect=True)
def test_timeout_is_retried(server):
    t0 = time.perf_counter()
    assert gen(backend(server.url, timeout_s=0.4))[0].completion_tokens == 7
    assert len(server.bodies) == 2 and time.perf_counter() - t0 < 1.4


@pytest.mark.parametrize("server", [[{"raw": b"<html>gateway</html>"}, {"json": {"choices": []}}]],
                         indirect=True)
def test_malformed_bodies_are_retried(server):
    assert gen(backend(server.url))[0].completion_tokens == 7
    assert len(server.bodies) == 3


@pytest.mark.parametrize("server", [[{"raw": b"{not json"}] * 9], indirect=True)
def test_persistent_malformed_body_gives_one_line(server):
    with pytest.raises(BackendError, match="malformed response body"):
        gen(backend(server.url, retries=1))


def test_server_down_is_one_clear_line():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendError) as e:
        gen(backend(url))
    assert str(e.value) == (f"model server at {url} is unreachable: start it or fix "
                            "model.options.base_url")


@pytest.mark.parametrize("server", [[{"status": 404, "json": {"error": {
    "message": "The model `nope` does not exist.", "type": "NotFoundError", "code": 404}}}]],
    indirect=True)
def test_wrong_model_names_it_and_lists_the_served_ones(server):
    with pytest.raises(BackendError) as e:
        gen(backend(server.url, path="nope"))
    assert str(e.value) == (f"model server at {server.url} does not serve model 'nope': set "
                            "model.path to one of: tiny")


def test_empty_model_path_uses_the_servers_only_model(server):
    gen(backend(server.url, path=""))
    assert server.bodies[0]["model"] == "tiny"


def test_empty_model_path_with_two_served_models_is_an_error(server):
    with pytest.raises(BackendError, match=r"serves \['tiny', 'tiny-2'\]: set model.path"):
        gen(backend(server.url + "/two", path=""))  # the GET handler lists two models


def test_concurrency_limit_holds(server):
    server.script = [{"sleep": 0.2}] * 6
    gens = gen(backend(server.url, concurrency=2), n=6)
    assert len(gens) == 6 and server.max_inflight == 2
    assert sorted(b["seed"] for b in server.bodies) == list(range(6))


def test_api_key_comes_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("KBX_TEST_KEY", "sk-test-123")
    gen(backend(server.url, api_key_env="KBX_TEST_KEY"))
    assert server.headers_seen[0]["authorization"] == "Bearer sk-test-123"
    monkeypatch.delenv("KBX_TEST_KEY")
    with pytest.raises(BackendError,
                       match="model.options.api_key_env names KBX_TEST_KEY but it is not set"):
        backend(server.url, api_key_env="KBX_TEST_KEY")


@pytest.mark.parametrize("server", [[{"status": 400, "json": {"error": {"message": "This model's "
    "maximum context length is 1024 tokens. However, you requested 2000 tokens."}}}]], indirect=True)
def test_prompt_over_the_context_is_truncated_not_fatal(server):
    g = gen(backend(server.url))[0]
    assert g.finish_reason == "length" and g.text == ""
    assert extract(g, "activation/relu", "relu").error_kind == "truncated"


@pytest.mark.parametrize("server", [[{"status": 401, "json": {"error": {"message": "bad key"}}}]],
                         indirect=True)
def test_refused_key_is_one_line(server):
    with pytest.raises(BackendError, match=r"refused the API key \(HTTP 401\)"):
        gen(backend(server.url))


def test_unknown_option_is_named():
    with pytest.raises(ConfigError, match=r"^unknown key model.options.concurrencyy in model "
                       r"reference: did you mean model.options.concurrency\?$"):
        backend("http://127.0.0.1:1/v1", concurrencyy=3)
