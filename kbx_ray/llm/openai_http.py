"""The `openai` backend: any OpenAI-compatible chat server (`vllm serve`, SGLang, hosted APIs).

Every prompt of a round is sent at once, up to `options.concurrency` requests in flight, so a
batching server stays busy. 429, 5xx, timeouts and malformed bodies are retried with exponential
backoff (honouring Retry-After); a server that was never reachable, an unknown model name or a
refused key stop the sweep with one line that says what to fix. httpx is imported lazily.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.llm.errors import BackendError
from kbx_ray.types import Generation

log = logging.getLogger(__name__)


@dataclass
class HTTPSettings:
    base_url: str                 # http://host:port/v1
    model: str = ""               # the served model id; "" = the server's only model
    api_key: str | None = None
    concurrency: int = 64         # requests in flight
    timeout_s: float = 600.0      # per request
    retries: int = 5              # extra attempts on 429 / 5xx / timeout / malformed body
    backoff_s: float = 1.0        # first wait; doubles per attempt, capped at max_backoff_s
    max_backoff_s: float = 60.0
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged into each request (top_k...)


OPTIONS = ("concurrency", "timeout_s", "retries", "backoff_s", "max_backoff_s", "extra_body")


class _Retry(Exception):
    """A failure worth another attempt; its message is the last cause seen."""

    def __init__(self, msg: str, wait_s: float | None = None) -> None:
        super().__init__(msg)
        self.wait_s = wait_s


def _server_message(resp: Any) -> str:
    try:
        err = resp.json().get("error", resp.json())
        msg = err.get("message", err) if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        msg = resp.text
    return " ".join(str(msg).split())[:300]


class OpenAIBackend:
    name = "openai"

    def __init__(self, s: HTTPSettings) -> None:
        self.s = s
        self.url = f"{s.base_url}/chat/completions"
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._model_lock: asyncio.Lock | None = None
        self._reached = False  # once the server has answered, connection errors are retried

    def _ensure_client(self) -> None:
        """One client and semaphore per event loop (each sweep runs its own loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            import httpx

            headers = {"Authorization": f"Bearer {self.s.api_key}"} if self.s.api_key else {}
            limits = httpx.Limits(max_connections=self.s.concurrency)
            self._client = httpx.AsyncClient(headers=headers, limits=limits,
                                             timeout=httpx.Timeout(self.s.timeout_s, connect=10.0))
            self._sem, self._loop = asyncio.Semaphore(self.s.concurrency), loop
            self._model_lock = asyncio.Lock()

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        self._ensure_client()
        assert self._sem is not None and self._model_lock is not None
        if not self.s.model:
            async with self._model_lock:  # every request of a round arrives at once: ask once
                if not self.s.model:
                    self.s.model = await self._only_model()
        body = {"model": self.s.model, "messages": messages, "temperature": params.temperature,
                "top_p": params.top_p, "max_tokens": params.max_tokens, "seed": params.seed,
                **self.s.extra_body}
        async with self._sem:
            t0 = time.perf_counter()
            data = await self._post(body)
            latency = time.perf_counter() - t0
        if data is None:  # the prompt does not fit the context: nothing was generated
            return Generation(text="", finish_reason="length", latency_s=latency, model=self.s.model)
        return _parse(data, latency, self.s.model)

    async def _post(self, body: dict) -> dict | None:
        last = ""
        for attempt in range(self.s.retries + 1):
            try:
                return await self._attempt(body)
            except _Retry as e:
                last = str(e)
                if attempt == self.s.retries:
                    break
                wait = e.wait_s if e.wait_s is not None else min(
                    self.s.max_backoff_s, self.s.backoff_s * 2 ** attempt)
                log.warning("%s (attempt %d of %d); retrying in %.1f s", last, attempt + 1,
                            self.s.retries + 1, wait)
                await asyncio.sleep(wait * (1 + 0.1 * random.random()))
        raise BackendError(f"model server at {self.s.base_url} failed {self.s.retries + 1} times, "
                           f"last: {last}: check the server's log")

    async def _attempt(self, body: dict) -> dict | None:
        import httpx

        try:
            resp = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as e:
            if isinstance(e, httpx.ConnectTimeout) and not self._reached:
                raise self._unreachable() from None
            raise _Retry(f"request timed out after {self.s.timeout_s:g} s") from None
        except httpx.TransportError as e:
            if not self._reached:
                raise self._unreachable() from None
            raise _Retry(f"connection failed: {type(e).__name__}: {e}") from None
        self._reached = True
        code = resp.status_code
        if code == 429 or code >= 500:
            after = resp.headers.get("retry-after")
            wait = float(after) if after and after.replace(".", "", 1).isdigit() else None
            raise _Retry(f"HTTP {code}: {_server_message(resp)}", wait)
        if code == 200:
            try:
                data = resp.json()
                data["choices"][0]["message"]
                return data
            except (ValueError, KeyError, IndexError, TypeError):
                raise _Retry(f"malformed response body: {resp.text[:120]!r}") from None
        msg = _server_message(resp)
        if code == 404 or (code == 400 and "model" in msg.lower() and (
                "not exist" in msg.lower() or "not found" in msg.lower())):
            raise BackendError(await self._wrong_model_message())
        if code in (401, 403):
            raise BackendError(f"model server at {self.s.base_url} refused the API key "
                               f"(HTTP {code}): set the variable named by model.api_key_env")
        if code == 400 and "context" in msg.lower() and "length" in msg.lower():
            log.warning("prompt too long for %s: %s", self.s.model, msg)
            return None
        raise BackendError(f"model server at {self.s.base_url} rejected the request "
                           f"(HTTP {code}): {msg}")

    def _unreachable(self) -> BackendError:
        return BackendError(f"model server at {self.s.base_url} is unreachable: start it or fix "
                            "model.base_url")

    async def _served_models(self) -> list[str] | None:
        try:
            resp = await self._client.get(f"{self.s.base_url}/models")
            return [m["id"] for m in resp.json()["data"]]
        except Exception:  # noqa: BLE001 - any failure just means "no list to show"
            return None

    async def _wrong_model_message(self) -> str:
        served = await self._served_models()
        hint = f"one of: {', '.join(served)}" if served else "a model the server serves"
        return (f"model server at {self.s.base_url} does not serve model {self.s.model!r}: set "
                f"model.path to {hint}")

    async def _only_model(self) -> str:
        import httpx

        try:
            resp = await self._client.get(f"{self.s.base_url}/models")
        except httpx.TransportError:
            raise self._unreachable() from None
        served = await self._served_models() if resp.status_code == 200 else None
        if not served or len(served) != 1:
            raise BackendError(f"model.path is empty and the server at {self.s.base_url} serves "
                               f"{served or 'no model list'}: set model.path to the model id")
        return served[0]


def _parse(data: dict, latency: float, model: str) -> Generation:
    choice = data["choices"][0]
    msg = choice.get("message") or {}
    text = msg.get("content") or ""
    thoughts = msg.get("reasoning_content") or msg.get("reasoning")
    if thoughts:  # servers with a reasoning parser split the thinking out; keep it on record
        text = f"<think>{thoughts}</think>\n{text}"
    usage = data.get("usage") or {}
    reason = choice.get("finish_reason") or "stop"
    return Generation(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0), latency_s=latency,
                      finish_reason="length" if reason in ("length", "max_tokens") else reason,
                      model=data.get("model") or model)


def settings_from(cfg: Any) -> HTTPSettings:
    """HTTPSettings from a ModelConfig; unknown options and a missing key are one-line errors."""
    opts = dict(getattr(cfg, "options", {}) or {})
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise BackendError(f"unknown model.options for the openai backend: {', '.join(unknown)} "
                           f"(known: {', '.join(OPTIONS)})")
    base = (getattr(cfg, "base_url", None) or "").rstrip("/")
    if not base:
        raise BackendError("the openai backend needs model.base_url, e.g. "
                           "model.base_url=http://localhost:8000/v1")
    if urlparse(base).path in ("", "/"):
        base += "/v1"
    key, env = None, getattr(cfg, "api_key_env", None)
    if env:
        key = os.environ.get(env)
        if not key:
            raise BackendError(f"model.api_key_env names {env} but it is not set: export {env}=...")
    return HTTPSettings(base_url=base, model=getattr(cfg, "path", "") or "", api_key=key, **opts)


def build(cfg: Any) -> OpenAIBackend:
    return OpenAIBackend(settings_from(cfg))
