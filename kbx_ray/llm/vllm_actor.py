"""The `vllm` backend: N Ray actor replicas, each an async actor around one vLLM AsyncLLM engine.
More: kbx_ray/llm/README.md, `vllm_actor.py`.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import time
import uuid
from typing import Any

from kbx_ray.config import ModelConfig
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.registry import register
from kbx_ray.llm.errors import BackendError
from kbx_ray.llm.replica_group import ReplicaGroup
from kbx_ray.llm.request import chat_body
from kbx_ray.llm import vllm_spec
from kbx_ray.llm.vllm_options import VLLMOptions
from kbx_ray.llm.vllm_spec import VLLMSpec, actor_options, for_cluster, placement_hint, spec_from
from kbx_ray.types import Generation

log = logging.getLogger(__name__)


class VLLMReplica:
    """One engine. Runs as a Ray async actor; all its requests share one event loop and batch."""

    def __init__(self, engine_kwargs: dict[str, Any], name: str, sampling: dict[str, Any]) -> None:
        path = str(engine_kwargs["model"])
        if path.startswith(("/", "./", "~")) and not os.path.isdir(os.path.expanduser(path)):
            raise FileNotFoundError(f"model folder {path} does not exist on this node")
        require_pinned_vllm()
        from vllm import AsyncEngineArgs, AsyncLLMEngine
        from vllm.usage.usage_lib import UsageContext

        # A sweep is an offline batch job: take vLLM's batch defaults (LLM_CLASS: e.g. a larger
        # max_num_batched_tokens), not its server ones, unless the preset sets them.
        self.engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**engine_kwargs),
                                                      usage_context=UsageContext.LLM_CLASS)
        self.tokenizer = self.engine.get_tokenizer()
        self.max_len = int(self.engine.model_config.max_model_len)
        # the model's generation config, as `vllm serve` reads it (generation_config="auto")
        self.defaults = dict(self.engine.model_config.get_diff_sampling_param())
        self.name, self.sampling = name, dict(sampling)

    def ready(self) -> dict[str, Any]:
        import ray

        return {"max_model_len": self.max_len, "pid": os.getpid(),
                "node_id": ray.get_runtime_context().get_node_id()}

    def shutdown(self) -> None:
        """Stop the engine's processes. Ray's kill takes only the actor's own process and its
        direct children, which would leave vLLM's worker processes running."""
        self.engine.shutdown()

    def load(self) -> int:
        """Requests inside the engine right now (running or queued): proof of batching."""
        return int(self.engine.get_num_unfinished_requests())

    async def prompt(self, messages: Messages) -> dict[str, Any]:
        """The engine input for a chat, rendered by vLLM's own chat renderer as `vllm serve` and
        `LLM.chat` render it (the template holds any BOS: no special tokens are added). A model
        without a chat template, which `vllm serve` refuses chat requests for, gets the contents
        joined."""
        from vllm.exceptions import VLLMValidationError

        if not getattr(self.tokenizer, "chat_template", None):
            text = "\n\n".join(m["content"] for m in messages) + "\n\n"
            return {"prompt_token_ids": list(self.tokenizer.encode(text,
                                                                  add_special_tokens=False))}
        renderer = self.engine.renderer
        tok = renderer.default_chat_tok_params.with_kwargs(add_special_tokens=False)
        try:
            _, inputs = await renderer.render_chat_async([messages], self._chat_params(), tok)
        except VLLMValidationError as e:  # over the context: say by how much
            if not re.search(r"maximum (model|context) length", str(e)):
                raise
            _, text = await renderer.render_messages_async(messages, self._chat_params())
            ids = text.get("prompt_token_ids") or self.tokenizer.encode(
                text.get("prompt", ""), add_special_tokens=False)
            raise PromptTooLong(len(ids)) from None
        return inputs[0]

    @staticmethod
    def _chat_params() -> Any:
        from vllm.renderers import ChatParams

        return ChatParams(chat_template_kwargs={"add_generation_prompt": True,
                                                "continue_final_message": False})

    def request(self, messages: Messages, params: GenParams) -> dict[str, Any]:
        """The chat body this generation is (the `openai` backend sends the same one)."""
        return chat_body(self.name, messages, params, self.sampling)

    async def build(self, messages: Messages, params: GenParams) -> tuple[dict[str, Any], Any]:
        """(engine input, SamplingParams) of one generation; PromptTooLong when the prompt alone
        fills the context."""
        engine_input = await self.prompt(messages)
        n_prompt = len(engine_input.get("prompt_token_ids") or ())
        if n_prompt >= self.max_len:
            raise PromptTooLong(n_prompt)
        return engine_input, sampling_params(self.request(messages, params), n_prompt,
                                             self.max_len, self.defaults)

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        """Tokenization runs on vLLM's own threads, off this event loop, as in `vllm serve`."""
        from vllm.exceptions import VLLMValidationError
        from vllm.v1.engine.exceptions import EngineDeadError

        t0 = time.perf_counter()
        final = None
        try:
            engine_input, sp = await self.build(messages, params)
            async for out in self.engine.generate(engine_input, sp, uuid.uuid4().hex):
                final = out
        except (VLLMValidationError, PromptTooLong) as e:
            if not isinstance(e, PromptTooLong) and \
                    not re.search(r"maximum (model|context) length", str(e)):
                raise
            # The prompt alone fills the context: nothing can be generated (extract: truncated).
            n_prompt = e.args[0] if isinstance(e, PromptTooLong) else 0
            return Generation(text="", prompt_tokens=n_prompt, finish_reason="length",
                              latency_s=time.perf_counter() - t0, model=self.name)
        except EngineDeadError:
            import ray

            if ray.get_runtime_context().get_actor_id() is None:  # not a Ray actor: just raise
                raise
            log.error("vLLM engine of %s died; exiting so Ray restarts this replica", self.name)
            os._exit(1)
        assert final is not None and final.outputs
        c = final.outputs[0]
        return Generation(text=c.text, prompt_tokens=len(final.prompt_token_ids or ()),
                          completion_tokens=len(c.token_ids), latency_s=time.perf_counter() - t0,
                          finish_reason="length" if c.finish_reason == "length" else "stop",
                          model=self.name)


class PromptTooLong(Exception):
    """The prompt fills the model's context: no token can be generated."""


def require_pinned_vllm() -> None:
    import vllm

    why = vllm_spec.version_problem(str(vllm.__version__))
    if why:
        raise RuntimeError(why)


def sampling_params(body: dict[str, Any], n_prompt: int, max_len: int,
                    defaults: dict[str, Any]) -> Any:
    """SamplingParams of a chat body, exactly as `vllm serve` makes them: vLLM's own request type
    and its max-tokens rule, over the model's generation config (`defaults`)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.serve.utils.api_utils import get_max_tokens

    request = ChatCompletionRequest(**body)
    limit = body.get("max_completion_tokens")  # as serve: this field first, then max_tokens
    limit = body.get("max_tokens") if limit is None else limit
    return request.to_sampling_params(get_max_tokens(max_len, limit, n_prompt, defaults), defaults)


def _free_resources() -> str:
    import ray

    free = ray.available_resources()
    return ", ".join(f"{k}={v:g}" for k, v in sorted(free.items())
                     if k in ("CPU", "GPU", "gen") or k.startswith("accelerator_type")) or "nothing"


def root_cause(err: BaseException) -> str:
    """The last `SomeError: message` line of a Ray error's embedded traceback."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    causes = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
    return (causes or lines or [type(err).__name__])[-1][:300]


class VLLMBackend:
    name = "vllm"

    def __init__(self, spec: VLLMSpec) -> None:
        import ray

        self.spec = spec
        hint = placement_hint(spec)
        if hint:
            log.warning(hint)
        remote = ray.remote(VLLMReplica)
        self.actors, self.groups = [], []
        for _ in range(spec.replicas):
            opts = actor_options(spec)
            if "scheduling_strategy" in opts:
                self.groups.append(opts["scheduling_strategy"].placement_group)
            self.actors.append(remote.options(**opts).remote(spec.engine, spec.name, spec.sampling))
        self.replicas = ReplicaGroup(self.actors, spec.max_inflight)
        self.info: list[dict] | None = None
        self._starting: dict[int, asyncio.Future] = {}

    async def wait_ready(self) -> list[dict]:
        """Block until every replica's engine is up (one check per event loop, shared by every
        waiting request); a failed start is one line."""
        if self.info is not None:
            return self.info
        loop = asyncio.get_running_loop()
        if id(loop) not in self._starting:
            self._starting = {id(loop): asyncio.ensure_future(self._start())}
        return await self._starting[id(loop)]

    async def _start(self) -> list[dict]:
        import ray

        ready = asyncio.ensure_future(self.replicas.broadcast("ready"))
        t0 = time.monotonic()
        try:
            while not ready.done():
                left = self.spec.startup_timeout_s - (time.monotonic() - t0)
                if left <= 0:
                    ready.cancel()
                    raise BackendError(
                        f"vllm replicas of {self.spec.name} did not start within "
                        f"{self.spec.startup_timeout_s:g} s: "
                        f"{placement_hint(self.spec) or 'check the replica logs'}")
                await asyncio.wait({ready}, timeout=min(60.0, left))
                if not ready.done():
                    log.warning("still waiting for %d vllm replica(s) of %s after %.0f s; free in "
                                "the cluster: %s", len(self.actors), self.spec.name,
                                time.monotonic() - t0, _free_resources())
            self.info = ready.result()
        except ray.exceptions.RayError as e:
            self._forget()  # a later build starts fresh replicas
            raise BackendError(f"vLLM engine for {self.spec.name} failed to start: {root_cause(e)}"
                               ": fix model.path / model.options.engine") from None
        log.info("vllm %s: %d replica(s) ready in %.0f s, at most %d requests in flight each",
                 self.spec.name, len(self.info), time.monotonic() - t0, self.spec.max_inflight)
        return self.info

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        import ray

        await self.wait_ready()
        try:
            return await self.replicas.call("generate", messages, params)
        except ray.exceptions.RayTaskError as e:
            raise BackendError(f"vllm replica of {self.spec.name} failed a request: "
                               f"{root_cause(e)}") from None
        except ray.exceptions.RayActorError as e:
            # Ray restarts a dead replica (max_restarts) and the group retries the request once on
            # it; this one died again or for good. Drop it: a resumed sweep starts fresh replicas.
            self._forget()
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160].rstrip(".")
            raise BackendError(
                f"vllm replica of {self.spec.name} died and its request failed again after a "
                f"retry ({why}; model.options.max_restarts={self.spec.max_restarts}): its log is "
                "under /tmp/ray/session_latest/logs; run the sweep again to resume (logged "
                "generations are not asked for again)") from None

    def close(self, timeout_s: float = 10.0) -> None:
        """Shut the engines down, then end the replicas and their placement groups. Never blocks
        for long: it runs on Ctrl-C and at exit, and a replica still pending (never placed, or
        loading) holds its shutdown call until it starts, so one not known to be up gets 2 s."""
        import ray

        try:
            ray.get([a.shutdown.remote() for a in self.actors],
                    timeout=timeout_s if self.info is not None else 2.0)
        except Exception as e:  # noqa: BLE001 - a dead, hung or pending replica is killed below
            log.log(logging.WARNING if self.info is not None else logging.DEBUG,
                    "vllm %s: a replica did not shut down cleanly: %s", self.spec.name,
                    root_cause(e))
        for a in self.actors:
            try:
                ray.kill(a)
            except ray.exceptions.RayError:  # already dead for good: Ray may have dropped it
                pass
        for pg in self.groups:
            ray.util.remove_placement_group(pg)
        self._forget()

    def _forget(self) -> None:
        """Leave the cache of live engines (if this is still the one cached for its spec)."""
        key = _live_key(self.spec)
        if _LIVE.get(key) is self:
            del _LIVE[key]


_LIVE: dict[str, VLLMBackend] = {}  # engines already up in this Ray session, by spec


def _close_all() -> None:
    """At driver exit, stop every engine this driver started. Registered by `build` after ray is
    imported, so it runs before Ray's own exit handler (atexit runs the last registered first)."""
    import ray

    if ray.is_initialized():
        for backend in list(_LIVE.values()):
            backend.close()


def _live_key(spec: VLLMSpec) -> str:
    import ray

    return f"{ray.get_runtime_context().get_job_id()}-{spec.key()}"


@register("backend", "vllm", check=vllm_spec.check, gpus=vllm_spec.spec_from,
          options=VLLMOptions)
def build(cfg: ModelConfig) -> VLLMBackend:
    """Replicas for this model config; a driver that builds the same config again (a resumed or
    repeated sweep in one process) reuses the engines already loaded instead of reloading them."""
    import ray

    spec = spec_from(cfg)
    if not ray.is_initialized():
        ray.init(include_dashboard=False, configure_logging=False)
    spec = for_cluster(spec)
    key = _live_key(spec)
    if key not in _LIVE:
        if not _LIVE:
            atexit.unregister(_close_all)
            atexit.register(_close_all)
        _LIVE[key] = VLLMBackend(spec)
    return _LIVE[key]
