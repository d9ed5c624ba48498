"""Every method, driven by the replay backend (deterministic) and judged by the real evaluator.

The completions are the crafted relu kernels of tests/fixtures/replay/relu/ (syntax error, wrong
values, correct, a distinct correct one); each test scripts which one the model "says" at each
(round, branch) and checks the attempts: rounds, branches, parents, stop reasons, error kinds, the
final answer, and what the follow-up prompts told the model.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.config.structured import ModelConfig
from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.llm.base import GenParams
from kbx_ray.llm.replay import build as build_replay
from kbx_ray.methods.base import Attempt, build_method
from kbx_ray.suites.builtin import get_task

pytestmark = pytest.mark.slow  # starts a warm sandboxed CPU evaluator

KERNELS = Path(__file__).parents[1] / "fixtures" / "replay" / "relu"
TASK = get_task("activation/relu")
S, W, C, F = "syntax_error", "wrong", "correct", "faster"


@pytest.fixture(scope="module")
def judge():
    """A warm CPU evaluator; identical code is judged once per module (the harness is
    deterministic on CPU), which keeps a dozen method runs to four real evaluations."""
    ev = Evaluator(EvalConfig(device="cpu", seeds=1, case_timeout_s=60, load_timeout_s=120))
    seen: dict = {}
    lock = asyncio.Lock()

    async def evaluate(cand):
        async with lock:
            if cand.candidate_id not in seen:
                seen[cand.candidate_id] = await asyncio.to_thread(ev.evaluate, TASK, cand)
            return seen[cand.candidate_id]

    yield evaluate
    ev.close()


def completion(name: str) -> str:
    return f"Let me write it.\n\n```python\n{(KERNELS / f'{name}.py').read_text()}```\n"


def run(judge, tmp_path: Path, script: dict[tuple[int, int], str], *overrides: str,
        **replay_opts) -> list[Attempt]:
    """Run the configured method with the model answering `script[(round, branch)]`."""
    path = tmp_path / "gen.jsonl"
    path.write_text("".join(json.dumps({"task_id": TASK.task_id, "sample": 0, "round": r,
                                        "branch": b, "completion": completion(n)}) + "\n"
                            for (r, b), n in script.items()))
    cfg = load_config(list(overrides)).method
    backend = build_replay(ModelConfig(name="replay", backend="replay",
                                       options={"path": str(path), **replay_opts}))
    calls: list[tuple[int, int]] = []

    async def generate(prompt, rnd, branch=0):
        calls.append((rnd, branch))
        meta = {"task_id": TASK.task_id, "sample": 0, "round": rnd, "branch": branch,
                "method": cfg.name}
        return await backend.generate(prompt.messages, GenParams(meta=meta))

    attempts = asyncio.run(build_method(cfg)(TASK, generate, judge))
    assert sorted(calls) == sorted((a.round, a.branch) for a in attempts)  # one attempt per call
    assert sum(a.final for a in attempts) == 1
    return attempts


def kinds(attempts: list[Attempt]) -> list[str]:
    return [a.result.error_kind for a in attempts]


def final(attempts: list[Attempt]) -> Attempt:
    return next(a for a in attempts if a.final)


def user_text(a: Attempt) -> str:
    return a.prompt.messages[-1]["content"]


def test_repair_stops_at_the_first_correct_round_and_feeds_back_each_verdict(judge, tmp_path):
    script = {(0, 0): S, (1, 0): W, (2, 0): C, (3, 0): F}
    att = run(judge, tmp_path, script, "method=repair", "method.rounds=3")
    assert [a.round for a in att] == [0, 1, 2] and kinds(att) == ["syntax_error", "mismatch", ""]
    assert [a.parent_candidate_id for a in att] == ["", att[0].candidate.candidate_id,
                                                     att[1].candidate.candidate_id]
    assert [a.stop_reason for a in att] == ["", "", "correct"] and final(att) is att[2]
    assert att[1].result.call_ok and not att[0].result.call_ok
    # Round 1 saw the syntax error; round 2 saw the mismatch summary; both saw the previous code.
    assert "syntax_error" in user_text(att[1]) and "expected ':'" in user_text(att[1])
    assert "max abs err" in user_text(att[2]) and "first bad index" in user_text(att[2])
    shown = f"```python\n{att[1].candidate.code.rstrip()}\n```"
    assert att[2].prompt.messages[-2] == {"role": "assistant", "content": shown}
    assert att[0].prompt.messages == att[1].prompt.messages[:2]  # the first prompt stays


def test_repair_never_runs_every_round_and_keeps_the_earliest_best(judge, tmp_path):
    script = {(0, 0): S, (1, 0): W, (2, 0): C, (3, 0): F}
    att = run(judge, tmp_path, script, "method=repair", "method.rounds=3", "method.stop_when=never")
    assert [a.round for a in att] == [0, 1, 2, 3] and kinds(att) == ["syntax_error", "mismatch", "", ""]
    assert att[-1].stop_reason == "max_rounds" and final(att) is att[2]
    assert "It is correct on every case" in user_text(att[3])
    assert "Timing was skipped: no GPU" in user_text(att[3])  # performance feedback on CPU


def test_repair_fast_never_stops_early_on_cpu(judge, tmp_path):
    script = {(0, 0): C, (1, 0): F}
    att = run(judge, tmp_path, script, "method=repair", "method.rounds=1", "method.stop_when=fast")
    assert [a.round for a in att] == [0, 1] and att[-1].stop_reason == "max_rounds"
    assert att[0].result.speedup is None and final(att) is att[0]


def test_repair_feedback_kinds_hide_what_is_not_asked_for(judge, tmp_path):
    script = {(0, 0): W, (1, 0): S, (2, 0): C}
    att = run(judge, tmp_path, script, "method=repair", "method.rounds=2", "method.feedback=[compile]")
    assert kinds(att) == ["mismatch", "syntax_error", ""]
    assert "It is not correct yet." in user_text(att[1]) and "max abs err" not in user_text(att[1])
    assert "expected ':'" in user_text(att[2])  # compile feedback is on


def test_parallel_workers_are_independent_chains(judge, tmp_path):
    script = {(0, 0): W, (1, 0): C, (0, 1): C, (0, 2): S, (1, 2): S}
    att = run(judge, tmp_path, script, "method=parallel", "method.rounds=1",
              "method.options.branches=3")
    chains = {b: [a for a in att if a.branch == b] for b in range(3)}
    assert [a.round for a in chains[0]] == [0, 1] and [a.round for a in chains[1]] == [0]
    assert [a.stop_reason for a in chains[0]] == ["", "correct"]
    assert chains[1][0].stop_reason == "correct" and chains[2][-1].stop_reason == "max_rounds"
    assert chains[0][1].parent_candidate_id == chains[0][0].candidate.candidate_id
    assert chains[2][1].parent_candidate_id == chains[2][0].candidate.candidate_id
    assert final(att) is chains[1][0]  # the earliest correct kernel


def test_agentic_restarts_every_round_from_the_best(judge, tmp_path):
    script = {(0, 0): S, (0, 1): W, (1, 0): C, (1, 1): S, (2, 0): F, (2, 1): W}
    att = run(judge, tmp_path, script, "method=agentic", "method.rounds=2",
              "method.options.branches=2")
    by = {(a.round, a.branch): a for a in att}
    assert sorted(by) == sorted(script) and by[(2, 0)].stop_reason == "max_rounds"
    best0, best1 = by[(0, 1)], by[(1, 0)]  # wrong beats syntax error; then the correct one
    assert {by[(1, b)].parent_candidate_id for b in (0, 1)} == {best0.candidate.candidate_id}
    assert {by[(2, b)].parent_candidate_id for b in (0, 1)} == {best1.candidate.candidate_id}
    assert "reflect, then fix" in user_text(by[(1, 0)])
    assert "candidate 0: syntax_error" in user_text(by[(1, 0)])
    assert "optimise" in user_text(by[(2, 0)]) and "candidate 1: syntax_error" in user_text(by[(2, 0)])
    assert final(att) is best1


def test_best_of_n_keeps_the_best_sample(judge, tmp_path):
    att = run(judge, tmp_path, {(0, 0): W, (0, 1): C, (0, 2): S}, "method=best_of_n",
              "method.options.branches=3")
    assert [(a.round, a.branch) for a in att] == [(0, 0), (0, 1), (0, 2)]
    assert kinds(att) == ["mismatch", "", "syntax_error"] and final(att) is att[1]
    assert len({json.dumps(a.prompt.messages) for a in att}) == 1


@pytest.mark.parametrize("preset, needle", [
    ("one_shot", None), ("few_shot", "## Example: vector_add"), ("cot", "Think step by step"),
])
def test_single_round_methods(judge, tmp_path, preset, needle):
    att = run(judge, tmp_path, {(0, 0): C}, f"method={preset}")
    assert len(att) == 1 and att[0].final and att[0].result.exec_ok
    assert att[0].stop_reason == "max_rounds"
    text = user_text(att[0])
    assert (needle in text) if needle else ("Example" not in text and "step by step" not in text)


def test_a_missing_completion_is_a_clear_error_or_a_configured_skip(judge, tmp_path):
    from kbx_ray.llm.replay import ReplayError

    with pytest.raises(ReplayError, match="no completion for task activation/relu sample 0 "
                                          "round 1 branch 0") as e:
        run(judge, tmp_path, {(0, 0): W}, "method=repair", "method.rounds=1")
    assert "\n" not in str(e.value) and "on_missing=skip" in str(e.value)
    att = run(judge, tmp_path, {(0, 0): W}, "method=repair", "method.rounds=1", on_missing="skip")
    assert kinds(att) == ["mismatch", "no_code_block"] and att[1].result.stage == "extract"
    assert att[1].generation.text == ""
