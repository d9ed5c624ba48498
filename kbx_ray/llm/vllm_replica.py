"""One vLLM engine inside a Ray async actor: a chat -> engine input and SamplingParams -> Generation.

The same chat body as the `openai` backend's (request.py) goes through vLLM's own
ChatCompletionRequest.to_sampling_params, over the model's generation config (where the preset
sets no top_p, top_k, ...), and the chat template is applied by the engine's own renderer, as
`vllm serve` does. vllm is imported only here, in the actor's process; the driver's side (the
replicas, their start and restarts) is vllm_actor.py's.
"""
from __future__ import annotations

import logging
import os
import re
import time
import uuid
from typing import Any

from kbx_ray.llm import vllm_spec
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.llm.request import chat_body
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
