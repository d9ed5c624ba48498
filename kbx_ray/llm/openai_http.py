"""The `openai` backend: any OpenAI-compatible chat server (`vllm serve`, SGLang, hosted APIs).
More: kbx_ray/llm/README.md, `openai_http.py`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from kbx_ray.config.structured import ModelConfig
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.llm.errors import BackendError
from kbx_ray.llm.request import chat_body, split_for_sdk
from kbx_ray.orchestration.per_loop import PerLoop
from kbx_ray.registry import register
from kbx_ray.orchestration.retry import Backoff, log_retry, retry
from kbx_ray.types import Generation

log = logging.getLogger(__name__)


@dataclass
class OpenAIOptions:
    """`model.options.*` of the openai backend (model.path is the served model id)."""

    base_url: str = "http://localhost:8000/v1"  # `vllm serve`'s; a bare host:port gets /v1
    api_key_env: str | None = None  # the environment variable holding the API key
    concurrency: int = 64         # requests in flight
    timeout_s: float = 600.0      # per request
    retries: int = 5              # extra attempts on 429 / 5xx / timeout / malformed body
    backoff_s: float = 1.0        # malformed bodies: first wait; doubles per attempt, capped at
    max_backoff_s: float = 60.0   # max_backoff_s (the SDK paces its own retries)
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged into each request
    sampling: dict[str, Any] = field(default_factory=dict)    # vLLM sampling fields (top_k,
    #                                   repetition_penalty, ...), as the vllm backend takes them


@dataclass
class HTTPSettings(OpenAIOptions):
    """The options as the client uses them: the URL completed, the model id and the key read."""

    model: str = ""               # the served model id; "" = the server's only model
    api_key: str | None = None


class _Malformed(Exception):
    """A 200 answer without a message: worth another attempt."""


def _server_message(e: Any) -> str:
    body = getattr(e, "body", None)
    msg = body.get("message", body) if isinstance(body, dict) else body
    if not msg:
        resp = getattr(e, "response", None)
        msg = resp.text if resp is not None else str(e)
    return " ".join(str(msg).split())[:300]


class OpenAIBackend:
    name = "openai"

    def __init__(self, s: HTTPSettings) -> None:
        self.s = s
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._first_lock: asyncio.Lock | None = None
        self._bound = PerLoop(self._connect)  # one client and semaphore per event loop
        self._reached = False  # once the server has answered, connection errors are retried

    def _ensure_client(self) -> None:
        self._bound.get()

    def _connect(self) -> None:
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=self.s.base_url, api_key=self.s.api_key or "EMPTY",
            max_retries=self.s.retries, timeout=openai.Timeout(self.s.timeout_s, connect=10.0))
        self._sem, self._first_lock = asyncio.Semaphore(self.s.concurrency), asyncio.Lock()

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        self._ensure_client()
        assert self._sem is not None and self._first_lock is not None
        if not self._reached or not self.s.model:
            async with self._first_lock:  # every request of a round arrives at once: ask once
                await self._first_contact()
        body = chat_body(self.s.model, messages, params, {**self.s.sampling, **self.s.extra_body})
        async with self._sem:
            t0 = time.perf_counter()
            out = await self._post(body)
            latency = time.perf_counter() - t0
        if out is None:  # the prompt does not fit the context: nothing was generated
            return Generation(text="", finish_reason="length", latency_s=latency,
                              model=self.s.model)
        return _parse(out, latency, self.s.model)

    async def _first_contact(self) -> None:
        """The model list, once: a server that does not answer it was never up (fail at once, not
        after the retries), and an empty model.path takes the server's only model."""
        if self._reached and self.s.model:
            return
        served = await self._served_models(unreachable_is_fatal=True)
        self._reached = True
        if not self.s.model:
            if not served or len(served) != 1:
                raise BackendError(f"model.path is empty and the server at {self.s.base_url} "
                                   f"serves {served or 'no model list'}: set model.path to the "
                                   "model id")
            self.s.model = served[0]

    async def _post(self, body: dict) -> Any:
        tries = self.s.retries + 1
        try:
            return await retry(lambda: self._attempt(body), attempts=tries, transient=(_Malformed,),
                               backoff=Backoff(self.s.backoff_s, self.s.max_backoff_s),
                               on_retry=log_retry(f"model server at {self.s.base_url}", tries))
        except _Malformed as e:
            raise self._failed(str(e)) from None

    def _failed(self, last: str) -> BackendError:
        return BackendError(f"model server at {self.s.base_url} failed {self.s.retries + 1} times, "
                            f"last: {last}: check the server's log")

    async def _attempt(self, body: dict) -> Any:
        import openai

        try:
            args, extra = split_for_sdk(body)
            out = await self._client.chat.completions.create(**args, extra_body=extra or None)
        except openai.APITimeoutError:
            raise self._failed(f"request timed out after {self.s.timeout_s:g} s") from None
        except openai.APIConnectionError as e:
            if not self._reached:
                raise self._unreachable() from None
            raise self._failed(f"connection failed: {e.__cause__ or e}") from None
        except openai.APIResponseValidationError as e:
            raise _Malformed(f"malformed response body: {_server_message(e)[:120]!r}") from None
        except openai.APIStatusError as e:
            return await self._status_error(e)
        except ValueError as e:  # a 200 whose body is not JSON
            raise _Malformed(f"malformed response body: {_server_message(e)[:120]!r}") from None
        choices = getattr(out, "choices", None)
        if not isinstance(choices, list) or not choices or \
                getattr(choices[0], "message", None) is None:
            raise _Malformed(f"malformed response body: {str(out)[:120]!r}")
        return out

    async def _status_error(self, e: Any) -> None:
        """A refusal after the SDK's retries: one line, or None for a prompt over the context."""
        code, msg = e.status_code, _server_message(e)
        if code == 429 or code >= 500:
            raise self._failed(f"HTTP {code}: {msg}") from None
        low = msg.lower()
        unknown_model = "model" in low and ("not exist" in low or "not found" in low)
        if code == 404 or (code == 400 and unknown_model):
            raise BackendError(await self._wrong_model_message()) from None
        if code in (401, 403):
            raise BackendError(f"model server at {self.s.base_url} refused the API key (HTTP "
                               f"{code}): set the variable named by model.options.api_key_env"
                               ) from None
        if code == 400 and "context" in low and "length" in low:
            log.warning("prompt too long for %s: %s", self.s.model, msg)
            return None
        raise BackendError(f"model server at {self.s.base_url} rejected the request "
                           f"(HTTP {code}): {msg}") from None

    def _unreachable(self) -> BackendError:
        return BackendError(f"model server at {self.s.base_url} is unreachable: start it or fix "
                            "model.options.base_url")

    async def _served_models(self, unreachable_is_fatal: bool = False) -> list[str] | None:
        import openai

        try:
            page = await self._client.with_options(max_retries=0).models.list()
            return [m.id for m in page.data]
        except openai.APIConnectionError:
            if unreachable_is_fatal:
                raise self._unreachable() from None
            return None
        except Exception:  # noqa: BLE001 - any other failure just means "no list to show"
            return None

    async def _wrong_model_message(self) -> str:
        served = await self._served_models()
        hint = f"one of: {', '.join(served)}" if served else "a model the server serves"
        return (f"model server at {self.s.base_url} does not serve model {self.s.model!r}: set "
                f"model.path to {hint}")


def _parse(out: Any, latency: float, model: str) -> Generation:
    choice = out.choices[0]
    msg = choice.message
    text = getattr(msg, "content", None) or ""
    thoughts = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
    if thoughts:  # servers with a reasoning parser split the thinking out; keep it on record
        text = f"<think>{thoughts}</think>\n{text}"
    usage = getattr(out, "usage", None)
    reason = getattr(choice, "finish_reason", None) or "stop"
    return Generation(text=text, prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                      completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                      latency_s=latency,
                      finish_reason="length" if reason in ("length", "max_tokens") else reason,
                      model=getattr(out, "model", None) or model)


def settings_from(cfg: ModelConfig) -> HTTPSettings:
    """HTTPSettings from a ModelConfig (its options typed by OpenAIOptions); an empty base_url or
    an unset key variable is one line."""
    opts: OpenAIOptions = cfg.typed_options()
    base = opts.base_url.rstrip("/")
    if not base:
        raise BackendError("the openai backend needs model.options.base_url, e.g. "
                           "model.options.base_url=http://localhost:8000/v1")
    if urlparse(base).path in ("", "/"):
        base += "/v1"
    key, env = None, opts.api_key_env
    if env:
        key = os.environ.get(env)
        if not key:
            raise BackendError(f"model.options.api_key_env names {env} but it is not set: "
                               f"export {env}=...")
    return HTTPSettings(**{**vars(opts), "base_url": base}, model=getattr(cfg, "path", "") or "",
                        api_key=key)


def check(cfg: ModelConfig, local: bool = True) -> None:
    """Before anything starts: the URL and the API key's variable."""
    settings_from(cfg)


@register("backend", "openai", requires=("openai",), extra="openai", check=check,
          options=OpenAIOptions)
def build(cfg: ModelConfig) -> OpenAIBackend:
    return OpenAIBackend(settings_from(cfg))
