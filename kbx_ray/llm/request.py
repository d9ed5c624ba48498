"""One preset, one request: the OpenAI chat body both LLM backends start from.

The `openai` backend sends this body to a server; the `vllm` backend hands the same body to vLLM's
own chat request type and turns it into SamplingParams the way `vllm serve` does
(vllm_actor.sampling_params). Fields the preset leaves unset are not sent, so the model's
generation config (`generation_config.json`: top_p, top_k, repetition_penalty, ...) fills them on
both, as `vllm serve` fills them. `model.options.sampling` adds vLLM's sampling fields (top_k,
min_p, repetition_penalty, ...) to the body on both backends.
"""
from __future__ import annotations

from typing import Any

from kbx_ray.llm.base import GenParams, Messages

# keyword arguments of the openai SDK's chat.completions.create; any other body field goes in
# its extra_body (on the wire the body is one JSON object either way)
OPENAI_ARGS = frozenset({"model", "messages", "temperature", "top_p", "max_tokens", "seed", "n",
                         "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
                         "top_logprobs", "max_completion_tokens", "user"})


def chat_body(model: str, messages: Messages, params: GenParams,
              sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chat request for one generation: what the preset sets, and nothing it leaves unset."""
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": params.max_tokens,
                            "seed": params.seed}
    for key in ("temperature", "top_p"):
        value = getattr(params, key)
        if value is not None:
            body[key] = value
    body.update(sampling or {})
    return body


def split_for_sdk(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create() keyword arguments, extra_body) of one body."""
    return ({k: v for k, v in body.items() if k in OPENAI_ARGS},
            {k: v for k, v in body.items() if k not in OPENAI_ARGS})
