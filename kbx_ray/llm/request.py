"""One preset, one request: the OpenAI chat body both LLM backends start from.
More: kbx_ray/llm/README.md, `request.py`.
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
